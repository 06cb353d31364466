package io.disaggusage.extproc.config;

import io.disaggusage.extproc.edge.MemberPaths;
import io.disaggusage.extproc.logtext.LogText;
import io.disaggusage.extproc.store.RedisUris;
import static io.disaggusage.extproc.config.ConfigLoader.formatDuration;

import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * The rules a bound {@link Config} must meet beyond its keys' types: bounds, formats, keys that must
 * agree, and the files and directories that must exist. Every broken rule is reported to {@link
 * ConfigProblems} under the key it concerns.
 */
final class ConfigValidator {

  private static final Duration MAX_CONTEXT_WAIT = Duration.ofHours(1);
  /** Envoy rejects a {@code message_timeout} above an hour. */
  private static final Duration MAX_ENVOY_MESSAGE_TIMEOUT = Duration.ofHours(1);
  private static final Duration MAX_DRAIN_TIMEOUT = Duration.ofHours(1);
  /** Upper bound of the gRPC connection durations (keepalive, idle, certificate reload). */
  private static final Duration MAX_CONNECTION_DURATION = Duration.ofHours(24);
  /** Re-reading certificate files more often than this gains nothing. */
  private static final Duration MIN_TLS_RELOAD_INTERVAL = Duration.ofMillis(100);
  /** A slow Redis must never hold LLM traffic longer than this per command. */
  private static final Duration MAX_REDIS_TIMEOUT = Duration.ofSeconds(5);
  /** The shortest positive duration: "must be positive" is "at least this". */
  private static final Duration POSITIVE = Duration.ofNanos(1);
  /** A collector pushed to more often than each second gains nothing; an hour is the longest sensible. */
  private static final Duration MIN_OTLP_INTERVAL = Duration.ofSeconds(1);
  private static final Duration MAX_OTLP_DURATION = Duration.ofHours(1);
  /** An HTTP header name (RFC 9110 token). */
  private static final Pattern HEADER_NAME = Pattern.compile("[!#$%&'*+.^_`|~0-9A-Za-z-]+");

  private static final Pattern NAMESPACE = Pattern.compile("[A-Za-z0-9_.-]+");
  private static final Pattern KEY_PREFIX = Pattern.compile("[A-Za-z0-9_.:-]{1,64}");

  private final ConfigProblems problems;

  ConfigValidator(ConfigProblems problems) {
    this.problems = problems;
  }

  void validate(Config config) {
    Config.Grpc grpc = config.grpc();
    Config.Limits limits = config.limits();
    Config.Store store = config.store();
    range("grpc.port", grpc.port(), 0, 65535, "must be between 0 and 65535 (0 picks a free port)");
    range("admin.port", config.admin().port(), 0, 65535, "must be between 0 and 65535 (0 picks a free port)");
    if (grpc.port() != 0 && grpc.port() == config.admin().port()) {
      problems.invalid("admin.port", "must differ from grpc.port (both are " + grpc.port() + ")");
    }
    positive("grpc.max_inbound_message_bytes", grpc.maxInboundMessageBytes());
    duration(
        "grpc.envoy_message_timeout", grpc.envoyMessageTimeout(), Duration.ofMillis(1), "must be at least 1ms",
        MAX_ENVOY_MESSAGE_TIMEOUT);
    positive("limits.max_body_bytes", limits.maxBodyBytes());
    positive("limits.max_event_bytes", limits.maxEventBytes());
    positive("limits.max_usage_bytes", limits.maxUsageBytes());
    positive("limits.max_key_bytes", limits.maxKeyBytes());
    range("metrics.max_models", config.metrics().maxModels(), 0, 1000, "must be between 0 and 1000");
    validateOtlp(config.metrics().otlp());
    range("limits.max_waiters", limits.maxWaiters(), 0, Long.MAX_VALUE, "must be 0 or more");
    positive("store.max_entries", store.maxEntries());
    Duration wait = config.ordering().contextWait();
    duration("ordering.context_wait", wait, POSITIVE, "must be positive", MAX_CONTEXT_WAIT);
    if (store.ttl().compareTo(wait) <= 0 && !problems.isUnreadable("ordering.context_wait")) {
      problems.invalid(
          "store.ttl",
          "must be longer than ordering.context_wait (" + formatDuration(wait) + "), got " + formatDuration(store.ttl()));
    }
    String namespace = config.metadata().namespace();
    if (namespace.isEmpty()) {
      problems.invalid("metadata.namespace", "must not be empty");
    } else if (!NAMESPACE.matcher(namespace).matches()) {
      problems.invalid("metadata.namespace", "\"" + namespace + "\" must match [A-Za-z0-9_.-]+");
    }
    validateClassification(config.classification());
    validateEdgeGuard(config.edgeGuard());
    validateStore(store);
    validateTransport(grpc, config.shutdown());
  }

  private void validateClassification(Config.Classification classification) {
    for (String path : classification.paths()) {
      if (!path.startsWith("/")) {
        problems.invalid("classification.paths", "\"" + path + "\" must start with /");
      } else if (path.contains("?") || path.chars().anyMatch(Character::isWhitespace)) {
        problems.invalid("classification.paths", "\"" + path + "\" must be a plain path, without query or spaces");
      }
    }
    List<String> contextClusters = classification.contextClusters();
    if (contextClusters.stream().anyMatch(String::isBlank)) {
      problems.invalid("classification.context_clusters", "cluster names must not be blank");
    }
    if (classification.generationClusters().stream().anyMatch(String::isBlank)) {
      problems.invalid("classification.generation_clusters", "cluster names must not be blank");
    }
    for (String cluster : classification.generationClusters()) {
      if (contextClusters.contains(cluster)) {
        problems.invalid(
            "classification.generation_clusters",
            "\"" + cluster + "\" is also listed in classification.context_clusters");
      }
    }
  }

  private void validateEdgeGuard(Config.EdgeGuard edge) {
    for (String header : edge.removeHeaders()) {
      if (!HEADER_NAME.matcher(header).matches()) {
        problems.invalid("edge_guard.remove_headers", "\"" + header + "\" is not a header name");
      } else if (!header.equals(header.toLowerCase(java.util.Locale.ROOT))) {
        problems.invalid("edge_guard.remove_headers", "\"" + header + "\" must be lower case, as Envoy sends names");
      } else if (header.equals("host")) {
        problems.invalid("edge_guard.remove_headers", "\"host\" cannot be removed (Envoy refuses it)");
      }
    }
    boolean pathsWritten = true;
    for (String path : edge.removeMembers()) {
      String problem = MemberPaths.problem(path);
      if (problem != null) {
        problems.invalid("edge_guard.remove_members", problem);
        pathsWritten = false;
      }
    }
    if (pathsWritten && !edge.removeMembers().isEmpty()) {
      try {
        MemberPaths.of(edge.removeMembers());
      } catch (IllegalArgumentException e) {
        problems.invalid("edge_guard.remove_members", e.getMessage());
      }
    }
    positive("edge_guard.max_string_bytes", edge.maxStringBytes());
  }

  private void validateStore(Config.Store store) {
    if (store.type() == Config.StoreType.REDIS) {
      if (store.redisCluster() && RedisUris.isSentinel(store.redisUri())) {
        problems.invalid("store.redis_cluster", "cannot be combined with a Sentinel store.redis_uri");
      } else {
        try {
          RedisUris.parse(store.redisUri(), store.redisCluster()); // the parser the store connects with
        } catch (IllegalArgumentException e) {
          problems.invalid("store.redis_uri", e.getMessage());
        }
      }
    }
    if (!KEY_PREFIX.matcher(store.keyPrefix()).matches()) {
      problems.invalid(
          "store.key_prefix",
          "\"" + store.keyPrefix() + "\" must be 1 to 64 characters of [A-Za-z0-9_.:-] (no braces: docs/redis.md)");
    }
    Duration redisTimeout = store.redisTimeout();
    if (redisTimeout.compareTo(Duration.ofMillis(1)) < 0 || redisTimeout.compareTo(MAX_REDIS_TIMEOUT) > 0) {
      problems.invalid(
          "store.redis_timeout",
          "must be between 1ms and " + formatDuration(MAX_REDIS_TIMEOUT) + ", got " + formatDuration(redisTimeout));
    }
  }

  /** {@code grpc.listen}, {@code grpc.tls.*}, the connection durations and {@code shutdown.*}. */
  private void validateTransport(Config.Grpc grpc, Config.Shutdown shutdown) {
    try {
      ListenAddress address = grpc.listenAddress();
      if (address.isUnix()) {
        Path parent = address.socketPath().getParent();
        if (!Files.isDirectory(parent)) {
          problems.invalid(
              "grpc.listen",
              "the socket's directory "
                  + parent
                  + " does not exist (it is not created; mount or create it, e.g. a volume shared with"
                  + " Envoy)");
        } else if (Files.isDirectory(address.socketPath())) {
          problems.invalid("grpc.listen", address.socketPath() + " is a directory, not a socket path");
        }
      }
    } catch (IllegalArgumentException e) {
      problems.invalid("grpc.listen", e.getMessage());
    }

    String offAtZero = "must not be negative (0 turns it off)";
    duration("grpc.keepalive_time", grpc.keepaliveTime(), Duration.ZERO, offAtZero, MAX_CONNECTION_DURATION);
    duration("grpc.permit_keepalive_time", grpc.permitKeepaliveTime(), Duration.ZERO, offAtZero, MAX_CONNECTION_DURATION);
    duration("grpc.max_connection_idle", grpc.maxConnectionIdle(), Duration.ZERO, offAtZero, MAX_CONNECTION_DURATION);
    duration("grpc.keepalive_timeout", grpc.keepaliveTimeout(), POSITIVE, "must be positive", MAX_CONNECTION_DURATION);
    range(
        "grpc.max_concurrent_streams",
        grpc.maxConcurrentStreams(),
        0,
        Integer.MAX_VALUE,
        "must not be negative (0 means no limit)");
    duration("shutdown.drain_timeout", shutdown.drainTimeout(), Duration.ZERO, "must not be negative", MAX_DRAIN_TIMEOUT);
    duration(
        "grpc.tls.reload_interval",
        grpc.tls().reloadInterval(),
        MIN_TLS_RELOAD_INTERVAL,
        "must be at least " + formatDuration(MIN_TLS_RELOAD_INTERVAL),
        MAX_CONNECTION_DURATION);
    validateTlsFiles(grpc.tls());
  }

  private void validateTlsFiles(Config.Tls tls) {
    boolean cert = !tls.certFile().isEmpty();
    boolean key = !tls.keyFile().isEmpty();
    // A key with a pairing problem is not also checked on disk: one message per key.
    String unpaired = null;
    if (cert && !key) {
      unpaired = "grpc.tls.cert_file";
      problems.invalid(unpaired, "is set but grpc.tls.key_file is not (set both or neither)");
    } else if (key && !cert) {
      unpaired = "grpc.tls.key_file";
      problems.invalid(unpaired, "is set but grpc.tls.cert_file is not (set both or neither)");
    } else if (tls.clientAuth() && !cert) {
      unpaired = "grpc.tls.client_ca_file";
      problems.invalid(
          unpaired,
          "requires grpc.tls.cert_file and grpc.tls.key_file (client certificates are checked only"
              + " over TLS)");
    }
    for (Map.Entry<String, String> file :
        List.of(
            Map.entry("grpc.tls.cert_file", tls.certFile()),
            Map.entry("grpc.tls.key_file", tls.keyFile()),
            Map.entry("grpc.tls.client_ca_file", tls.clientCaFile()))) {
      String problem = file.getValue().isEmpty() ? null : readableFileProblem(file.getValue());
      if (problem != null && !file.getKey().equals(unpaired)) {
        problems.invalid(file.getKey(), problem);
      }
    }
  }

  private void positive(String key, long value) {
    range(key, value, 1, Long.MAX_VALUE, "must be positive");
  }

  /** {@code key} must hold {@code min} to {@code max}; else {@code rule} and what it got. */
  private void range(String key, long value, long min, long max, String rule) {
    if (value < min || value > max) {
      problems.invalid(key, rule + ", got " + value);
    }
  }

  /** {@code key} must hold {@code min} ({@code belowMin} otherwise) to {@code max}. */
  private void duration(String key, Duration value, Duration min, String belowMin, Duration max) {
    if (value.compareTo(min) < 0) {
      problems.invalid(key, belowMin + ", got " + formatDuration(value));
    } else if (value.compareTo(max) > 0) {
      problems.invalid(key, "must be at most " + formatDuration(max) + ", got " + formatDuration(value));
    }
  }

  /** Why {@code name} is not a readable regular file, or null when it is. */
  private static String readableFileProblem(String name) {
    Path path;
    try {
      path = Path.of(name);
    } catch (InvalidPathException e) {
      return "invalid path \"" + name + "\": " + e.getReason();
    }
    if (!Files.exists(path)) {
      return "file " + path + " does not exist";
    }
    if (!Files.isRegularFile(path)) {
      return path + " is not a regular file";
    }
    if (!Files.isReadable(path)) {
      return "file " + path + " is not readable by this process";
    }
    return null;
  }

  private void validateOtlp(Config.Otlp otlp) {
    if (otlp.enabled()) {
      String shown = LogText.withoutCredentials(otlp.endpoint());
      try {
        java.net.URI uri = new java.net.URI(otlp.endpoint());
        String scheme = uri.getScheme() == null ? "" : uri.getScheme().toLowerCase(java.util.Locale.ROOT);
        if (!(scheme.equals("http") || scheme.equals("https")) || uri.getHost() == null) {
          problems.invalid("metrics.otlp.endpoint",
              "\"" + shown + "\" must be an http:// or https:// URL with a host, e.g. http://otel-collector:4318");
        }
      } catch (java.net.URISyntaxException e) {
        problems.invalid("metrics.otlp.endpoint", "\"" + shown + "\" is not a URL: " + LogText.withoutCredentials(e.getReason()));
      }
    }
    duration("metrics.otlp.interval", otlp.interval(), MIN_OTLP_INTERVAL, "must be at least 1s", MAX_OTLP_DURATION);
    duration("metrics.otlp.timeout", otlp.timeout(), POSITIVE, "must be positive", MAX_OTLP_DURATION);
    for (String header : otlp.headers()) {
      int eq = header.indexOf('=');
      if (eq <= 0 || !HEADER_NAME.matcher(header.substring(0, eq).trim()).matches()) {
        // the value may be a secret: only the part before '=' is quoted
        problems.invalid("metrics.otlp.headers",
            "each entry must be name=value with a header name before '=', got one starting \""
                + header.substring(0, Math.max(0, Math.min(eq, 40))) + "\"");
      }
    }
  }
}
