package io.disaggusage.extproc.config;

import io.disaggusage.extproc.classify.PhaseHeaderPolicy;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import java.time.Duration;
import java.util.List;

/**
 * The whole service configuration, as loaded from YAML, environment and flags. Immutable; every value
 * has been validated by {@link ConfigLoader} before an instance is handed to the rest of the service.
 *
 * <p>These records are the one declaration of every key: a section is a component of this record, a
 * key the snake_case form of a section's component ({@code ordering.context_wait}), a nested record
 * a subsection ({@code grpc.tls}). Each key carries its {@link Default}; its type says how it is
 * written ({@link Bytes} makes an integer a size). The key list, environment variable names, help
 * text and {@code docs/configuration.md} check are all derived from here (see {@link ConfigKey}).
 */
public record Config(
    Grpc grpc,
    Admin admin,
    Classification classification,
    Ordering ordering,
    Store store,
    Metadata metadata,
    Limits limits,
    Metrics metrics,
    Logging logging,
    Shutdown shutdown,
    Streaming streaming,
    EdgeGuard edgeGuard) {

  /**
   * {@code grpc.*}: the ext_proc + grpc.health.v1 listener.
   *
   * @param port TCP port (unused with a Unix socket)
   * @param maxInboundMessageBytes largest gRPC message accepted
   * @param listen where to listen: empty for every interface on {@code port}, a host or IP address
   *     for that address on {@code port}, or {@code unix:///absolute/path} for a Unix domain socket (see
   *     {@link ListenAddress}); surrounding blanks are dropped
   * @param keepaliveTime idle time after which the server pings a connection; zero disables the pings
   * @param keepaliveTimeout how long the server waits for a ping acknowledgement before closing the
   *     connection
   * @param permitKeepaliveTime the shortest interval between client pings the server tolerates (a
   *     client pinging more often gets GOAWAY {@code too_many_pings}); zero permits any rate
   * @param maxConcurrentStreams concurrent streams per connection; 0 for no limit
   * @param maxConnectionIdle a connection without streams for this long is closed gracefully; zero
   *     keeps idle connections
   * @param envoyMessageTimeout the {@code message_timeout} of the calling Envoy's ext_proc filter: a
   *     stream that ends while a reply has been owed this long, or a reply that goes out this late,
   *     counts as {@code envoy_gave_up}
   * @param tls server TLS, off unless a certificate is configured
   */
  public record Grpc(
      @Default("9002") int port,
      @Default("64MiB") @Bytes int maxInboundMessageBytes,
      @Default("") String listen,
      @Default("30s") Duration keepaliveTime,
      @Default("10s") Duration keepaliveTimeout,
      @Default("10s") Duration permitKeepaliveTime,
      @Default("0") int maxConcurrentStreams,
      @Default("0s") Duration maxConnectionIdle,
      @Default("200ms") Duration envoyMessageTimeout,
      Tls tls) {

    public Grpc {
      listen = listen.trim();
    }

    /** {@link #listen()} parsed; the loader has validated it. */
    public ListenAddress listenAddress() {
      return ListenAddress.parse(listen);
    }
  }

  /**
   * {@code grpc.tls.*}: server TLS and, with a client CA, mutual TLS. Empty file names mean unset;
   * surrounding blanks are dropped.
   *
   * @param certFile PEM certificate chain, leaf first
   * @param keyFile PEM private key of the leaf certificate (PKCS#8, PKCS#1 RSA or SEC1 EC)
   * @param clientCaFile PEM CA certificates that client certificates must chain to; when set, clients
   *     must present a certificate
   * @param reloadInterval how often the files are re-read, so a rotated certificate is served without
   *     a restart
   */
  public record Tls(
      @Default("") String certFile,
      @Default("") String keyFile,
      @Default("") String clientCaFile,
      @Default("1m") Duration reloadInterval) {

    public Tls {
      certFile = certFile.trim();
      keyFile = keyFile.trim();
      clientCaFile = clientCaFile.trim();
    }

    /** True when the listener serves TLS. */
    public boolean enabled() {
      return !certFile.isEmpty();
    }

    /** True when clients must present a certificate that chains to {@link #clientCaFile()}. */
    public boolean clientAuth() {
      return !clientCaFile.isEmpty();
    }
  }

  /**
   * {@code shutdown.*}: what SIGTERM (and {@code close()}) does.
   *
   * @param drainTimeout how long in-flight ext_proc streams may run after the server stopped accepting
   *     new ones, before they are cancelled
   */
  public record Shutdown(@Default("30s") Duration drainTimeout) {}

  /**
   * {@code streaming.*}: what the service may change in streaming requests.
   *
   * @param injectIncludeUsage make streaming requests of context and generation legs that do not ask
   *     for usage ask for it ({@code stream_options.include_usage: true}), so the service sees the
   *     numbers, and take the resulting usage event out of what the client receives
   */
  public record Streaming(@Default("false") boolean injectIncludeUsage) {}

  /**
   * {@code edge_guard.*}: the service's role. Off (the default), it corrects usage on the calls between
   * the orchestrator and the workers. On, the same port serves the edge guard instead, for the
   * client-facing route: it removes from client requests what only the prefill/decode machinery may set,
   * and leaves every other byte as the client sent it (docs/reliability.md, "Trust model").
   *
   * @param enabled run as the edge guard instead of the usage correction
   * @param removeHeaders request headers removed besides every {@code x-disagg-*} one (lower-case names)
   * @param removeMembers members removed from the JSON request bodies of {@code classification.paths},
   *     as paths of names from the root separated by {@code .}, compared decoded
   * @param maxStringBytes longest JSON string such a body may hold; a longer one is refused, since the
   *     parser holds one string at a time whole (this bounds a stream's memory)
   */
  public record EdgeGuard(
      @Default("false") boolean enabled,
      @Default("epp-profile, x-trtllm-msgpack, x-prefiller-host-port") List<String> removeHeaders,
      @Default(
              "kv_transfer_params, disaggregated_params, bootstrap_host, bootstrap_port, bootstrap_room,"
                  + " vllm_xargs.kv_transfer_params, sampling_params.extra_args.kv_transfer_params")
          List<String> removeMembers,
      @Default("16MiB") @Bytes int maxStringBytes) {

    public EdgeGuard {
      removeHeaders = List.copyOf(removeHeaders);
      removeMembers = List.copyOf(removeMembers);
    }
  }

  /** {@code admin.*}: the HTTP admin listener (/healthz /readyz /metrics). */
  public record Admin(@Default("9090") int port) {}

  /**
   * {@code classification.*}: how exchanges are recognised (behaviour.md §3).
   *
   * @param contextClusters Envoy cluster names ({@code xds.cluster_name}) of context/prefill pools
   * @param generationClusters cluster names of generation/decode pools
   * @param paths request paths (without query) whose exchanges are inspected
   * @param stripAcceptEncoding remove {@code accept-encoding} from handled requests so workers answer
   *     uncompressed
   * @param trustIdHeader an exchange whose {@code x-disagg-phase} (or cluster) and {@code
   *     x-disagg-request-id} headers settle phase and key is not read, so its usage is bound to the key
   *     alone: only where the edge strips {@code x-disagg-*} from every client request
   * @param phaseHeader what an {@code x-disagg-phase} header may decide: {@code fallback}, only an
   *     exchange that neither the cluster nor a body marker decides; {@code ignore}, nothing
   */
  public record Classification(
      @Default("") List<String> contextClusters,
      @Default("") List<String> generationClusters,
      @Default("/v1/chat/completions, /v1/completions, /v1/responses, /v1/messages") List<String> paths,
      @Default("true") boolean stripAcceptEncoding,
      @Default("false") boolean trustIdHeader,
      @Default("fallback") PhaseHeaderPolicy phaseHeader) {

    public Classification {
      contextClusters = List.copyOf(contextClusters);
      generationClusters = List.copyOf(generationClusters);
      paths = List.copyOf(paths);
    }
  }

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
   * @param clampWithoutContext read a generation response that has no context usage, so that a count
   *     in it that cannot be true is clamped (behaviour.md §2); false: such a response passes unread
   */
  public record Ordering(
      @Default("2s") Duration contextWait,
      @Default("passthrough") Fallback fallback,
      @Default("true") boolean clampWithoutContext) {}

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
      @Default("memory") StoreType type,
      @Default("1m") Duration ttl,
      @Default("redis://127.0.0.1:6379") @Secret(Secret.Part.URI_CREDENTIALS) String redisUri,
      @Default("100000") long maxEntries,
      @Default("disagg_usage:") String keyPrefix,
      @Default("50ms") Duration redisTimeout,
      @Default("false") boolean redisCluster) {}

  /** {@code metadata.*}: Envoy dynamic metadata (behaviour.md §7). */
  public record Metadata(@Default("disagg_usage") String namespace) {}

  /**
   * {@code limits.*}: per-stream memory bounds, anything larger passes through unmodified and is
   * counted; and the bound on waiting exchanges.
   *
   * @param maxBodyBytes largest part of a JSON body held back (from its usage object on), or context
   *     JSON body read
   * @param maxEventBytes largest single SSE event the service holds to rewrite
   * @param maxUsageBytes largest {@code usage} object the service parses
   * @param maxKeyBytes longest correlation key accepted (longer keys: exchange not correlated)
   * @param maxWaiters a bound on generation exchanges waiting for their context usage at once
   *     (concurrent / generation-first flows). Over it an exchange does not wait: its usage passes
   *     through unchanged with outcome {@code context_timeout}, and the refusal is counted. 0 means no
   *     exchange ever waits
   */
  public record Limits(
      @Default("16MiB") @Bytes int maxBodyBytes,
      @Default("1MiB") @Bytes int maxEventBytes,
      @Default("64KiB") @Bytes int maxUsageBytes,
      @Default("256") @Bytes int maxKeyBytes,
      @Default("10000") int maxWaiters) {}

  /**
   * {@code metrics.*}: how the {@code model} label is bounded, so a client naming models cannot explode
   * metric cardinality.
   *
   * @param models the models that get their own label value; empty means the first {@code maxModels}
   *     distinct models seen
   * @param maxModels with no allow-list, how many distinct models get their own label value; every
   *     other model is counted as {@code other}
   * @param otlp OpenTelemetry metrics pushed over OTLP, off unless an endpoint is set
   */
  public record Metrics(@Default("") List<String> models, @Default("20") int maxModels, Otlp otlp) {

    public Metrics {
      models = List.copyOf(models);
    }
  }

  /**
   * {@code metrics.otlp.*}: OpenTelemetry metrics with the GenAI names ({@code gen_ai.client.token.usage})
   * pushed over OTLP/HTTP (protobuf) to a collector, beside {@code /metrics}. Off unless an endpoint is set.
   *
   * @param endpoint the collector's OTLP/HTTP base URL, e.g. {@code http://otel-collector:4318}
   *     ({@code /v1/metrics} is appended); empty turns the export off
   * @param interval how often the metrics are pushed
   * @param timeout how long one push may take before it is dropped
   * @param headers {@code name=value} pairs sent with every push (a collector's authentication);
   *     never logged
   */
  public record Otlp(
      @Default("") @Secret(Secret.Part.URI_CREDENTIALS) String endpoint,
      @Default("1m") Duration interval,
      @Default("10s") Duration timeout,
      @Default("") @Secret(Secret.Part.ENTRY_VALUES) List<String> headers) {

    public Otlp {
      endpoint = endpoint.trim();
      headers = List.copyOf(headers);
    }

    /** True when metrics are pushed. */
    public boolean enabled() {
      return !endpoint.isEmpty();
    }
  }

  /** {@code logging.format}: how each log line is written to stdout. */
  public enum LogFormat {
    /** One human-readable line per event (default). */
    TEXT,
    /** One JSON object per line: timestamp, level, logger, thread, message, mdc, exception. */
    JSON
  }

  /** {@code logging.level}: the root log level. */
  public enum LogLevel {
    TRACE,
    DEBUG,
    INFO,
    WARN,
    ERROR,
    OFF
  }

  /**
   * {@code logging.*}: the log line format and the root level. The {@code --log-level} flag (and its
   * variable {@code DISAGG_USAGE_LOG_LEVEL}) set {@code logging.level} with the highest precedence.
   */
  public record Logging(@Default("text") LogFormat format, @Default("info") LogLevel level) {}

  /**
   * The embedded defaults: what {@code java -jar} runs with no config file. Each key's {@link Default}
   * bound as the configuration; the same instance on every call.
   */
  public static Config defaults() {
    return ConfigTree.DEFAULTS;
  }

  /**
   * The embedded default of a key, written as in an environment variable: a size or duration with its
   * unit, a list comma-separated. Every key (record component of a section) carries one.
   */
  @Retention(RetentionPolicy.RUNTIME)
  @Target(ElementType.RECORD_COMPONENT)
  public @interface Default {
    String value();
  }

  /** Marks an integer key as a size in bytes, written plain or with a KiB, MiB or GiB suffix. */
  @Retention(RetentionPolicy.RUNTIME)
  @Target(ElementType.RECORD_COMPONENT)
  public @interface Bytes {}

  /**
   * Marks a key whose value may carry a secret, and which part of it: {@code --print-config} and every
   * message that quotes the value show that part as {@code ***}.
   */
  @Retention(RetentionPolicy.RUNTIME)
  @Target(ElementType.RECORD_COMPONENT)
  public @interface Secret {
    /** What of the value is secret. */
    Part value();

    /** The secret part of a value. */
    enum Part {
      /** The user-info of a URI ({@code redis://user:password@host}: user and password). */
      URI_CREDENTIALS,
      /** The value of each {@code name=value} entry (headers such as {@code authorization=...}). */
      ENTRY_VALUES
    }
  }
}
