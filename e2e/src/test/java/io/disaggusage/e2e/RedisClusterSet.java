package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.FreePorts;
import io.lettuce.core.Range;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * A Redis Cluster of three masters with one replica each, real redis-server processes on loopback, as
 * operators run it: the slots split in three, each replica following its master. Nodes deem a silent
 * peer failed after {@link #NODE_TIMEOUT}, after which its replica takes over its slots.
 */
final class RedisClusterSet implements AutoCloseable {
  /** {@code cluster-node-timeout}: short, so a failover completes in about two seconds. */
  static final Duration NODE_TIMEOUT = Duration.ofMillis(1000);
  private static final int MASTERS = 3;
  private static final int SLOTS = 16384;

  private final List<RedisProcess> nodes = new ArrayList<>();
  private final List<Integer> busPorts = new ArrayList<>();

  private RedisClusterSet() {}

  /** Starts six nodes and joins them into one cluster; returns once every node reports it healthy. */
  static RedisClusterSet start(String name) {
    RedisClusterSet set = new RedisClusterSet();
    try {
      for (int i = 0; i < 2 * MASTERS; i++) {
        // The bus port is chosen too: by default it is the port + 10 000, which can land on a port the
        // system handed out as an ephemeral one (seen: "bind: Address already in use").
        int busPort = FreePorts.next();
        set.busPorts.add(busPort);
        RedisProcess node = new RedisProcess(name + "-node-" + i, FreePorts.next(), List.of(
            "--cluster-enabled", "yes", "--cluster-port", Integer.toString(busPort), "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", Long.toString(NODE_TIMEOUT.toMillis()), "--cluster-announce-ip", "127.0.0.1"));
        set.nodes.add(node);
        node.start();
      }
      set.join();
      return set;
    } catch (RuntimeException | AssertionError e) {
      set.close();
      throw e;
    }
  }

  private void join() {
    List<String> ids = nodes.stream().map(n -> RedisAdmin.on(n.port(), c -> c.clusterMyId())).toList();
    for (int i = 1; i < nodes.size(); i++) {
      RedisAdmin.clusterMeet(nodes.get(0).port(), nodes.get(i).port(), busPorts.get(i));
    }
    for (int i = 0; i < MASTERS; i++) {
      int from = SLOTS * i / MASTERS;
      int to = SLOTS * (i + 1) / MASTERS - 1;
      RedisAdmin.on(nodes.get(i).port(), c -> c.clusterAddSlotsRange(Range.create(from, to)));
    }
    // A replica can follow only a master it has heard of: wait until every node knows all six.
    Processes.await("every cluster node knows the others", Duration.ofSeconds(20), () -> nodes.stream().allMatch(
        n -> RedisAdmin.tryOn(n.port(), c -> c.clusterNodes()).map(t -> t.lines().count() == nodes.size()).orElse(false)));
    for (int i = 0; i < MASTERS; i++) {
      String master = ids.get(i);
      RedisAdmin.on(nodes.get(MASTERS + i).port(), c -> c.clusterReplicate(master));
    }
    Processes.await("the cluster healthy, every replica in sync", Duration.ofSeconds(30), this::healthy);
  }

  /**
   * Every live node reports {@code cluster_state:ok} and every live replica's link to its master is up:
   * what the cluster is after it has absorbed a fault.
   */
  boolean healthy() {
    for (RedisProcess node : nodes) {
      if (!node.isAlive()) {
        continue;
      }
      boolean ok = RedisAdmin.tryOn(node.port(), c -> {
        if (!c.clusterInfo().contains("cluster_state:ok")) {
          return false;
        }
        List<Object> role = c.role();
        return "master".equals(role.get(0)) || "connected".equals(String.valueOf(role.get(3)));
      }).orElse(false);
      if (!ok) {
        return false;
      }
    }
    return true;
  }

  /** The seed URI: every master, the form docs/redis.md gives for {@code redis_cluster: true}. */
  String seedsUri() {
    StringBuilder uri = new StringBuilder("redis://");
    for (int i = 0; i < MASTERS; i++) {
      uri.append(i == 0 ? "" : ",").append(nodes.get(i).address());
    }
    return uri.toString();
  }

  /** The service settings of a replica whose store is this cluster. */
  String[] storeSettings() {
    return new String[] {"--set", "store.type=redis", "--set", "store.redis_cluster=true", "--set", "store.redis_uri=" + seedsUri()};
  }

  /** The slot of a key, as the cluster computes it. */
  int slotOf(String key) {
    return liveNode().map(n -> RedisAdmin.on(n.port(), c -> c.clusterKeyslot(key)).intValue())
        .orElseThrow(() -> new AssertionError("no cluster node alive"));
  }

  /** The node that masters {@code slot} now, as a live node that is itself a master sees it. */
  RedisProcess masterOf(int slot) {
    for (RedisProcess node : nodes) {
      if (!node.isAlive()) {
        continue;
      }
      Optional<String> view = RedisAdmin.tryOn(node.port(), c -> c.clusterNodes());
      if (view.isEmpty()) {
        continue;
      }
      for (String line : view.get().lines().toList()) {
        String[] f = line.split(" ");
        if (!f[2].contains("master") || f[2].contains("fail")) {
          continue;
        }
        for (int i = 8; i < f.length; i++) {
          String[] range = f[i].split("-");
          if (range[0].startsWith("[")) {
            continue; // a slot being migrated
          }
          int lo = Integer.parseInt(range[0]);
          int hi = range.length > 1 ? Integer.parseInt(range[1]) : lo;
          if (lo <= slot && slot <= hi) {
            return byAddress(f[1].substring(0, f[1].indexOf('@')));
          }
        }
      }
    }
    throw new AssertionError("no live node names a master of slot " + slot);
  }

  /** The node whose replication follows {@code master} now. */
  RedisProcess replicaOf(RedisProcess master) {
    for (RedisProcess node : nodes) {
      if (node != master && node.isAlive()
          && RedisAdmin.tryOn(node.port(), c -> c.role()).filter(r -> "slave".equals(r.get(0)) && ((Number) r.get(2)).intValue() == master.port()).isPresent()) {
        return node;
      }
    }
    throw new AssertionError("no live replica follows " + master.address());
  }

  private RedisProcess byAddress(String address) {
    return nodes.stream().filter(n -> n.address().equals(address)).findFirst()
        .orElseThrow(() -> new AssertionError("not a node of this cluster: " + address));
  }

  private Optional<RedisProcess> liveNode() {
    return nodes.stream().filter(RedisProcess::isAlive).findFirst();
  }

  @Override
  public void close() {
    nodes.forEach(RedisProcess::close);
  }
}
