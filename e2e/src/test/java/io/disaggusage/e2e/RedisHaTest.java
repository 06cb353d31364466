package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * The highly available Redis deployments docs/redis.md gives, as real redis-server processes on
 * loopback, each under two service replicas behind real Envoy on the shipped settings and eight
 * closed-loop P/D flows whose numbers are their own ({@link TruthFlow}). Faults: the Cluster master
 * holding the store's slot killed, then a master frozen 3 s; a sentinel killed, then the Sentinel
 * master killed. Throughout: no flow ever reads another flow's numbers or loses a byte, no service
 * replica restarts. Healthy phases are corrected, and flows are corrected again within
 * {@link #RECOVERY} of the failover completing (when the promoted node first answers as master).
 */
class RedisHaTest {
  private static final String RELEASE = Tools.envoyReleases().get(0);
  /** The store's hash tag with the default key prefix (docs/redis.md): every key lives in its slot. */
  private static final String STORE_TAG = "{disagg_usage:v2}";
  /** The most a failover may cost after it completed, by the issue that asked for HA. */
  private static final Duration RECOVERY = Duration.ofSeconds(1);
  private static final int FLOWS = 8;
  private static final Duration FAILOVER_LIMIT = Duration.ofSeconds(20);

  @Test
  void aClusterLosingAndFreezingTheStoresMasterKeepsEveryFlowRight() {
    try (RedisClusterSet cluster = RedisClusterSet.start("ha-cluster");
        Stack stack = Stack.start("ha-cluster", RELEASE, 2, cluster.storeSettings())) {
      Replicas replicas = new Replicas(stack);
      int slot = cluster.slotOf(STORE_TAG);
      List<String> recoveries = new ArrayList<>();
      try (ReadinessWatch readiness = new ReadinessWatch(stack);
          ClosedLoop load = new ClosedLoop(stack, new TruthFlow().install(stack), FLOWS)) {
        warmUpThenHealthy(load, replicas);

        RedisProcess first = cluster.masterOf(slot);
        RedisProcess second = cluster.replicaOf(first);
        long killed = System.nanoTime();
        first.kill();
        load.phase("2 slot master killed", 0);
        long promoted = awaitMaster("the replica of the killed master promoted", second);
        load.phase("3 failed over", 2000);
        recoveries.add(recovery(load, "Cluster, master SIGKILL", killed, promoted));
        replicas.assertReady("after the kill failover");
        System.out.println(readinessFollowed(readiness, "Cluster, master SIGKILL", killed));

        first.start(); // back with its nodes.conf: it rejoins as the new master's replica
        Processes.await("the killed master back as a replica", Duration.ofSeconds(30),
            () -> cluster.healthy() && cluster.replicaOf(second) == first);
        load.phase("4 healthy, old master a replica", 2000);

        long frozen = System.nanoTime();
        second.freeze();
        load.phase("5 slot master frozen", 0);
        Long takenOver = promotedWithin(first, Duration.ofSeconds(3));
        Processes.sleepMillis(Math.max(0, 3000 - Duration.ofNanos(System.nanoTime() - frozen).toMillis()));
        second.thaw();
        long thawed = System.nanoTime();
        load.phase("6 thawed", 2000);
        recoveries.add(recovery(load, "Cluster, master SIGSTOP 3 s" + (takenOver == null ? " (no failover: from the thaw)" : ""),
            frozen, takenOver == null ? thawed : takenOver));
        Processes.await("the cluster healthy after the thaw", Duration.ofSeconds(30), cluster::healthy);
        load.phase("7 healthy again", 2000);
        replicas.assertReady("after the freeze");
        System.out.println(readinessFollowed(readiness, "Cluster, master SIGSTOP 3 s", frozen));
        load.close();

        System.out.printf("Redis Cluster (3 masters + 3 replicas), two services, Envoy %s, %d flows: %s%n", RELEASE, FLOWS, load);
        recoveries.forEach(System.out::println);
        load.assertEveryFlowRight("1 healthy", List.of("4 healthy, old master a replica", "7 healthy again"));
        assertThat(recoveries).allMatch(r -> r.contains("within limit"), "every recovery within " + RECOVERY.toMillis() + " ms");
        replicas.assertNoneRestarted();
        replicas.assertLogged("the lost master", first.address());
        replicas.assertLogged("the failover", "failover");
      }
    }
  }

  @Test
  void aSentinelSetLosingASentinelAndThenItsMasterKeepsEveryFlowRight() {
    try (RedisSentinelSet sentinels = RedisSentinelSet.start("ha-sentinel");
        Stack stack = Stack.start("ha-sentinel", RELEASE, 2, sentinels.storeSettings())) {
      Replicas replicas = new Replicas(stack);
      List<String> recoveries = new ArrayList<>();
      try (ReadinessWatch readiness = new ReadinessWatch(stack);
          ClosedLoop load = new ClosedLoop(stack, new TruthFlow().install(stack), FLOWS)) {
        warmUpThenHealthy(load, replicas);

        sentinels.sentinels.get(0).kill(); // the first the URI names: the one a client asks first
        load.phase("2 a sentinel killed", 2000);

        long killed = System.nanoTime();
        sentinels.master.kill();
        load.phase("3 master killed", 0);
        Processes.await("the sentinels naming the replica as master", FAILOVER_LIMIT,
            () -> sentinels.masterPortSeen().filter(p -> p == sentinels.replica.port()).isPresent());
        long promoted = System.nanoTime();
        load.phase("4 failed over", 2000);
        recoveries.add(recovery(load, "Sentinel, master SIGKILL", killed, promoted));
        load.phase("5 healthy again", 2000);
        replicas.assertReady("after the failover");
        System.out.println(readinessFollowed(readiness, "Sentinel, master SIGKILL", killed));
        load.close();

        System.out.printf("Redis Sentinel (1 master, 1 replica, 3 sentinels), two services, Envoy %s, %d flows: %s%n",
            RELEASE, FLOWS, load);
        recoveries.forEach(System.out::println);
        load.assertEveryFlowRight("1 healthy", List.of("2 a sentinel killed", "5 healthy again"));
        assertThat(recoveries).allMatch(r -> r.contains("within limit"), "every recovery within " + RECOVERY.toMillis() + " ms");
        replicas.assertNoneRestarted();
        replicas.assertLogged("the lost master", sentinels.master.address());
        replicas.assertLogged("the failover", "failover");
      }
    }
  }

  /** The phases before any fault: a warm-up of the fresh JVMs (held to no wrong or broken flow only), then healthy. */
  private static void warmUpThenHealthy(ClosedLoop load, Replicas replicas) {
    load.phase("0 warm-up", 2000);
    load.phase("1 healthy", 3000);
    replicas.assertReady("after the first healthy phase");
  }

  /** Polls until {@code node} answers as master; when it did. */
  private static long awaitMaster(String what, RedisProcess node) {
    Processes.await(what, FAILOVER_LIMIT, () -> RedisAdmin.isMaster(node.port()));
    return System.nanoTime();
  }

  /** When {@code node} first answered as master within {@code limit}, or null. */
  private static Long promotedWithin(RedisProcess node, Duration limit) {
    long deadline = System.nanoTime() + limit.toNanos();
    while (System.nanoTime() < deadline) {
      if (RedisAdmin.isMaster(node.port())) {
        return System.nanoTime();
      }
      Processes.sleepMillis(10);
    }
    return null;
  }

  /** One line: the fault, how long the failover took, how long after it flows were corrected again. */
  private static String recovery(ClosedLoop load, String fault, long faultNanos, long failoverNanos) {
    Duration again = load.firstCorrectedAfter(failoverNanos).orElse(null);
    boolean ok = again != null && again.compareTo(RECOVERY) <= 0;
    return String.format("%s: failover completed %d ms after the fault; flows corrected again %s after it (%s)",
        fault, Duration.ofNanos(failoverNanos - faultNanos).toMillis(),
        again == null ? "never" : again.toMillis() + " ms", ok ? "within limit" : "OVER " + RECOVERY.toMillis() + " ms");
  }

  /**
   * Asserts that every replica's {@code /readyz} answered 503 after the fault and 200 again after that,
   * by now; the line that says when.
   */
  private static String readinessFollowed(ReadinessWatch readiness, String fault, long faultNanos) {
    long now = System.nanoTime();
    StringBuilder line = new StringBuilder(fault + ": /readyz");
    for (int i = 0; i < readiness.replicas(); i++) {
      Optional<Duration> down = readiness.firstNotReady(i, faultNanos, now);
      assertThat(down).as(fault + ": replica " + i + " answered 503 while its store was failing").isPresent();
      Optional<Duration> up = readiness.firstReady(i, faultNanos + down.get().toNanos(), now);
      assertThat(up).as(fault + ": replica " + i + " answered 200 again").isPresent();
      line.append(String.format("%s replica %d 503 %d ms and 200 again %d ms after the fault",
          i == 0 ? "" : ";", i, down.get().toMillis(), down.get().plus(up.get()).toMillis()));
    }
    return line.toString();
  }
}
