package io.disaggusage.extproc.store;

import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.event.ClusterTopologyChangedEvent;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;
import io.lettuce.core.event.Event;
import io.lettuce.core.event.EventBus;
import io.lettuce.core.event.connection.ConnectedEvent;
import io.lettuce.core.event.connection.ReconnectAttemptEvent;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.Disposable;

/**
 * Tells operators which Redis node failed and which failover the store followed, from the Lettuce
 * client's event bus: one line when a connection to a node is lost (its first reconnect attempt, not
 * every one), one when a lost node is reached again, and one when the store's data moves to another
 * node — a Cluster topology in which another master serves the store's slot, or a Sentinel-managed
 * connection that reconnects to a different master. Connections to sentinels are lookups, not data, and
 * are left out.
 */
final class RedisNodeEvents implements AutoCloseable {
  /** The store's logger: its lines keep the name operators filter on. */
  private static final Logger log = LoggerFactory.getLogger(RedisContextUsageStore.class);

  private final Set<String> sentinels;
  private final Integer slot;
  private final Set<String> lost = ConcurrentHashMap.newKeySet();
  private volatile String master;
  private final Disposable subscription;

  /**
   * @param nodes the parsed {@code store.redis_uri} (its sentinels, if any, are recognised)
   * @param slot the Cluster slot of the store's keys, or null outside a Cluster
   */
  RedisNodeEvents(EventBus bus, List<RedisURI> nodes, Integer slot) {
    this.sentinels = nodes.stream()
        .flatMap(node -> node.getSentinels().stream())
        .map(sentinel -> sentinel.getHost() + ":" + sentinel.getPort())
        .collect(Collectors.toUnmodifiableSet());
    this.slot = slot;
    this.subscription = bus.get().subscribe(this::on, error -> log.debug("Redis store: event bus ended", error));
  }

  private void on(Event event) {
    if (event instanceof ReconnectAttemptEvent attempt) {
      String node = address(attempt.remoteAddress());
      if (!sentinels.contains(node) && lost.add(node)) {
        log.warn("Redis store: lost the connection to {}; reconnecting, traffic passes through meanwhile", node);
      }
    } else if (event instanceof ConnectedEvent connected) {
      String node = address(connected.remoteAddress());
      if (sentinels.contains(node)) {
        return;
      }
      if (lost.remove(node)) {
        log.info("Redis store: {} reachable again", node);
      }
      if (slot == null) {
        String before = master;
        master = node;
        if (before != null && !before.equals(node)) {
          log.info("Redis store: failover seen: the store's master is now {} (was {})", node, before);
        }
      }
    } else if (event instanceof ClusterTopologyChangedEvent changed && slot != null) {
      String before = servingSlot(changed.before());
      String after = servingSlot(changed.after());
      if (before != null && after != null && !Objects.equals(before, after)) {
        log.info("Redis store: failover seen: the Cluster serves the store's slot {} from {} now (was {})", slot, after, before);
      }
    }
  }

  private String servingSlot(List<RedisClusterNode> topology) {
    for (RedisClusterNode node : topology) {
      if ((node.is(RedisClusterNode.NodeFlag.UPSTREAM) || node.is(RedisClusterNode.NodeFlag.MASTER)) && node.hasSlot(slot) && node.getUri() != null) {
        return node.getUri().getHost() + ":" + node.getUri().getPort();
      }
    }
    return null;
  }

  /** {@code host:port} as the URI names it, without a resolver's {@code name/} prefix. */
  static String address(SocketAddress address) {
    if (address instanceof InetSocketAddress inet) {
      return inet.getHostString() + ":" + inet.getPort();
    }
    return String.valueOf(address);
  }

  @Override
  public void close() {
    subscription.dispose();
  }
}
