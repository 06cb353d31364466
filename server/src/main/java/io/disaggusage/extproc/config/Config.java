package io.disaggusage.extproc.config;

import java.time.Duration;
import java.util.List;

/**
 * The whole service configuration, as loaded from YAML, environment and flags. Immutable; every value
 * has been validated by {@link ConfigLoader} before an instance is handed to the rest of the service.
 * YAML keys are the snake_case forms of these component names (see README, "Configuration").
 */
public record Config(
    Grpc grpc,
    Admin admin,
    Classification classification,
    Ordering ordering,
    Store store,
    Metadata metadata,
    Limits limits,
    Metrics metrics) {

  /** {@code grpc.*}: the ext_proc + grpc.health.v1 listener. */
  public record Grpc(int port, int maxInboundMessageBytes) {}

  /** {@code admin.*}: the HTTP admin listener (/healthz /readyz /metrics). */
  public record Admin(int port) {}

  /**
   * {@code classification.*}: how exchanges are recognised (behaviour.md §3).
   *
   * @param contextClusters Envoy cluster names ({@code xds.cluster_name}) of context/prefill pools
   * @param generationClusters cluster names of generation/decode pools
   * @param paths request paths (without query) whose exchanges are inspected
   * @param stripAcceptEncoding remove {@code accept-encoding} from handled requests so workers answer
   *     uncompressed
   */
  public record Classification(
      List<String> contextClusters,
      List<String> generationClusters,
      List<String> paths,
      boolean stripAcceptEncoding) {}

  /** What a generation exchange does when its context usage does not arrive in time. */
  public enum Fallback {
    /** Forward the generation worker's usage unchanged (default). */
    PASSTHROUGH
  }

  /**
   * {@code ordering.*} (behaviour.md §4).
   *
   * @param contextWait deadline for concurrent / generation-first flows
   * @param fallback what to emit when the deadline passes
   */
  public record Ordering(Duration contextWait, Fallback fallback) {}

  /** {@code store.type}. */
  public enum StoreType {
    MEMORY,
    REDIS
  }

  /**
   * {@code store.*}: where context usage waits for its generation exchange.
   *
   * @param maxEntries bound on entries held by the memory store
   * @param keyPrefix prefix of every Redis key and channel the Redis store uses (docs/redis.md)
   * @param redisTimeout budget of one Redis command; past it the exchange passes through
   * @param redisCluster connect to {@code redisUri} as a Redis Cluster seed node
   */
  public record Store(
      StoreType type,
      Duration ttl,
      String redisUri,
      long maxEntries,
      String keyPrefix,
      Duration redisTimeout,
      boolean redisCluster) {}

  /** {@code metadata.*}: Envoy dynamic metadata (behaviour.md §7). */
  public record Metadata(String namespace) {}

  /**
   * {@code limits.*}: per-stream memory bounds. Anything larger passes through unmodified and is counted.
   *
   * @param maxBodyBytes largest JSON body (or JSON part held back) the service rewrites
   * @param maxEventBytes largest single SSE event the service holds to rewrite
   * @param maxUsageBytes largest {@code usage} object the service parses
   * @param maxKeyBytes longest correlation key accepted (longer keys: exchange not correlated)
   */
  public record Limits(int maxBodyBytes, int maxEventBytes, int maxUsageBytes, int maxKeyBytes) {}

  /**
   * {@code metrics.*}: how the {@code model} label is bounded, so a client naming models cannot explode
   * metric cardinality.
   *
   * @param models the models that get their own label value; empty means the first {@code maxModels}
   *     distinct models seen
   * @param maxModels with no allow-list, how many distinct models get their own label value; every
   *     other model is counted as {@code other}
   */
  public record Metrics(List<String> models, int maxModels) {}

  /** The embedded defaults: what {@code java -jar} runs with no config file. */
  public static Config defaults() {
    return new Config(
        new Grpc(9002, 64 * 1024 * 1024),
        new Admin(9090),
        new Classification(
            List.of(),
            List.of(),
            List.of("/v1/chat/completions", "/v1/completions", "/v1/responses"),
            true),
        new Ordering(Duration.ofSeconds(2), Fallback.PASSTHROUGH),
        new Store(
            StoreType.MEMORY,
            Duration.ofSeconds(60),
            "redis://127.0.0.1:6379",
            100_000,
            "disagg_usage:",
            Duration.ofMillis(50),
            false),
        new Metadata("disagg_usage"),
        new Limits(16 * 1024 * 1024, 1024 * 1024, 64 * 1024, 256),
        new Metrics(List.of(), 20));
  }
}
