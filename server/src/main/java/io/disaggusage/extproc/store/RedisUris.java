package io.disaggusage.extproc.store;

import io.disaggusage.extproc.logtext.LogText;
import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.RedisClusterURIUtil;
import java.net.URI;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * {@code store.redis_uri} read as the store connects with it, by Lettuce's own parsers: one node
 * ({@code redis://}, {@code rediss://}), a Sentinel set ({@code redis-sentinel://s1,s2,s3/0#master},
 * one {@link RedisURI} holding every sentinel), or the seed nodes of a Cluster ({@code redis://h1,h2}
 * with {@code store.redis_cluster}). The configuration check and the connection use this one class, so
 * what starts is what connects.
 */
public final class RedisUris {
  private static final Set<String> SCHEMES = Set.of("redis", "rediss", "redis-sentinel", "rediss-sentinel");

  private RedisUris() {}

  /**
   * The nodes to connect to: a one-element list for a single node or a Sentinel set, the seeds for a
   * Cluster.
   *
   * @throws IllegalArgumentException saying what is wrong; the message quotes the URI without its
   *     credentials and never repeats a password
   */
  public static List<RedisURI> parse(String text, boolean cluster) {
    String trimmed = text.trim();
    String shown = "\"" + LogText.withoutCredentials(trimmed) + "\"";
    if (!SCHEMES.contains(scheme(trimmed))) {
      throw new IllegalArgumentException(
          shown + " must be a redis://, rediss://, redis-sentinel:// or rediss-sentinel:// URI");
    }
    boolean sentinel = isSentinel(trimmed);
    if (sentinel && cluster) {
      throw new IllegalArgumentException(shown + " is a Sentinel URI: a Cluster is named by its seed nodes, redis://h1,h2");
    }
    List<RedisURI> nodes;
    try {
      nodes = cluster ? RedisClusterURIUtil.toRedisURIs(URI.create(trimmed)) : List.of(RedisURI.create(trimmed));
    } catch (RuntimeException e) {
      String reason = e instanceof NumberFormatException
          ? "the database (path) must be a number"
          : e.getMessage() == null ? e.getClass().getSimpleName() : LogText.withoutCredentials(e.getMessage());
      throw new IllegalArgumentException("invalid Redis URI " + shown + ": " + reason, e);
    }
    if (nodes.isEmpty()) {
      throw new IllegalArgumentException(shown + " has no host (expected e.g. redis://redis.example:6379)");
    }
    RedisURI first = nodes.get(0);
    if (sentinel) {
      if (first.getSentinels().isEmpty() || first.getSentinelMasterId() == null || first.getSentinelMasterId().isBlank()) {
        throw new IllegalArgumentException(
            shown + " names no sentinel or no master (expected e.g. redis-sentinel://s1:26379,s2:26379,s3:26379/0#mymaster)");
      }
      return nodes;
    }
    for (RedisURI node : nodes) {
      if (node.getHost() == null || node.getHost().isBlank()) {
        throw new IllegalArgumentException(shown + " has no host (expected e.g. redis://redis.example:6379)");
      }
      if (!cluster && node.getHost().contains(",")) {
        throw new IllegalArgumentException(shown + " names several hosts: Cluster seed nodes need store.redis_cluster:"
            + " true, several sentinels a redis-sentinel:// URI");
      }
    }
    return nodes;
  }

  /** Whether {@code text} names a Sentinel set ({@code redis-sentinel://}, {@code rediss-sentinel://}). */
  public static boolean isSentinel(String text) {
    return scheme(text.trim()).endsWith("-sentinel");
  }

  private static String scheme(String trimmed) {
    int colon = trimmed.indexOf("://");
    return colon < 0 ? "" : trimmed.substring(0, colon).toLowerCase(Locale.ROOT);
  }

  /** {@code host:port} of each node, or the Sentinel master's name: for log lines, never credentials. */
  public static String describe(List<RedisURI> nodes) {
    RedisURI first = nodes.get(0);
    if (!first.getSentinels().isEmpty()) {
      return "sentinel master " + first.getSentinelMasterId() + " via "
          + String.join(",", first.getSentinels().stream().map(s -> s.getHost() + ":" + s.getPort()).toList());
    }
    return String.join(",", nodes.stream().map(n -> n.getHost() + ":" + n.getPort()).toList());
  }
}
