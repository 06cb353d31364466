package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.FreePorts;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * A Sentinel deployment as operators run it, real redis-server processes on loopback: one master, one
 * replica and three sentinels with a quorum of two. A sentinel deems the master down after
 * {@link #DOWN_AFTER} without an answer; the sentinels then promote the replica.
 */
final class RedisSentinelSet implements AutoCloseable {
  static final String MASTER_NAME = "mymaster";
  /** {@code down-after-milliseconds}: short, so a failover completes in about two seconds. */
  static final Duration DOWN_AFTER = Duration.ofMillis(1000);
  private static final int QUORUM = 2;

  final RedisProcess master;
  final RedisProcess replica;
  final List<RedisProcess> sentinels = new ArrayList<>();

  private RedisSentinelSet(String name) {
    this.master = new RedisProcess(name + "-master", FreePorts.next(), List.of());
    this.replica = new RedisProcess(name + "-replica", FreePorts.next(), List.of("--replicaof", "127.0.0.1", Integer.toString(master.port())));
    for (int i = 0; i < 3; i++) {
      sentinels.add(RedisProcess.sentinel(name + "-sentinel-" + i, MASTER_NAME, master.port(), QUORUM, DOWN_AFTER));
    }
  }

  /** Starts the data nodes, then the sentinels; returns once every sentinel knows the replica and its peers. */
  static RedisSentinelSet start(String name) {
    RedisSentinelSet set = new RedisSentinelSet(name);
    try {
      set.master.start();
      set.replica.start();
      Processes.await("the replica in sync", Duration.ofSeconds(20), () -> RedisAdmin.tryOn(set.replica.port(), c -> c.role())
          .map(r -> "connected".equals(String.valueOf(r.get(3)))).orElse(false));
      set.sentinels.forEach(RedisProcess::start);
      // A failover needs the sentinels to know the replica and a majority of each other.
      Processes.await("every sentinel sees the replica and two peers", Duration.ofSeconds(30), () -> set.sentinels.stream().allMatch(
          s -> RedisAdmin.trySentinel(s.port(), c -> c.master(MASTER_NAME))
              .map(m -> "1".equals(m.get("num-slaves")) && "2".equals(m.get("num-other-sentinels"))).orElse(false)));
      return set;
    } catch (RuntimeException | AssertionError e) {
      set.close();
      throw e;
    }
  }

  /** The URI docs/redis.md gives: every sentinel, the database, the master's name. */
  String uri() {
    StringBuilder uri = new StringBuilder("redis-sentinel://");
    for (int i = 0; i < sentinels.size(); i++) {
      uri.append(i == 0 ? "" : ",").append(sentinels.get(i).address());
    }
    return uri.append("/0#").append(MASTER_NAME).toString();
  }

  /** The service settings of a replica whose store is this deployment. */
  String[] storeSettings() {
    return new String[] {"--set", "store.type=redis", "--set", "store.redis_uri=" + uri()};
  }

  /** The port of the master a live sentinel names now, if any answers. */
  Optional<Integer> masterPortSeen() {
    for (RedisProcess sentinel : sentinels) {
      if (sentinel.isAlive()) {
        Optional<Integer> port = RedisAdmin.trySentinel(sentinel.port(), c -> c.getMasterAddrByName(MASTER_NAME))
            .map(a -> ((InetSocketAddress) a).getPort());
        if (port.isPresent()) {
          return port;
        }
      }
    }
    return Optional.empty();
  }

  @Override
  public void close() {
    sentinels.forEach(RedisProcess::close);
    replica.close();
    master.close();
  }
}
