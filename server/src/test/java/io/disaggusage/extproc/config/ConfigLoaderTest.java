package io.disaggusage.extproc.config;

import io.disaggusage.extproc.classify.PhaseHeaderPolicy;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.params.provider.Arguments.arguments;

import io.disaggusage.extproc.config.ConfigLoader.Setting;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

class ConfigLoaderTest {

  @TempDir Path dir;

  private static final String FULL_YAML =
      """
      grpc:
        port: 19002
        max_inbound_message_bytes: 8MiB
        listen: 127.0.0.1
        keepalive_time: 45s
        keepalive_timeout: 5s
        permit_keepalive_time: 1s
        max_concurrent_streams: 5000
        max_connection_idle: 10m
        envoy_message_timeout: 500ms
        tls:
          reload_interval: 30s
      admin:
        port: 19090
      classification:
        context_clusters: [prefill-a, prefill-b]
        generation_clusters:
          - decode-a
        paths: [/v1/chat/completions]
        strip_accept_encoding: false
      ordering:
        context_wait: 750ms
        fallback: PassThrough
      store:
        type: memory
        ttl: 2m
        redis_uri: rediss://user:secret@redis.example:6380/2
        max_entries: 5000
        key_prefix: "llm:usage:"
        redis_timeout: 20ms
        redis_cluster: true
      metadata:
        namespace: usage.fix-1
      limits:
        max_body_bytes: 1048576
        max_event_bytes: 256KiB
        max_usage_bytes: 4KiB
        max_key_bytes: 128
      shutdown:
        drain_timeout: 45s
      """;

  private Path write(String name, String text) throws IOException {
    Path file = dir.resolve(name);
    Files.writeString(file, text);
    return file;
  }

  private static ConfigException failure(ThrowingLoad load) {
    try {
      load.run();
    } catch (ConfigException e) {
      return e;
    }
    throw new AssertionError("expected a ConfigException");
  }

  private interface ThrowingLoad {
    void run() throws ConfigException;
  }

  @Test
  void noFileNoEnvironmentGivesTheDefaults() throws Exception {
    assertThat(ConfigLoader.load(null, Map.of())).isEqualTo(Config.defaults());
  }

  @Test
  void theBehaviourDocSampleIsExactlyTheDefaults() throws Exception {
    String sample =
        """
        grpc:
          port: 9002                 # ext_proc + grpc.health.v1; --grpc-port
        admin:
          port: 9090                 # /metrics /healthz /readyz; --admin-port
        classification:
          context_clusters: []
          generation_clusters: []
        ordering:
          context_wait: 2s
        store:
          type: memory               # memory | redis
          ttl: 60s
          redis_uri: redis://127.0.0.1:6379
        metadata:
          namespace: disagg_usage
        """;
    assertThat(ConfigLoader.fromYaml(sample)).isEqualTo(Config.defaults());
  }

  @Test
  void fullFileSetsEveryKey() throws Exception {
    Config config = ConfigLoader.load(write("full.yaml", FULL_YAML), Map.of());

    assertThat(config.grpc())
        .isEqualTo(
            new Config.Grpc(
                19002,
                8 * 1024 * 1024,
                "127.0.0.1",
                Duration.ofSeconds(45),
                Duration.ofSeconds(5),
                Duration.ofSeconds(1),
                5000,
                Duration.ofMinutes(10),
                Duration.ofMillis(500),
                new Config.Tls("", "", "", Duration.ofSeconds(30))));
    assertThat(config.shutdown()).isEqualTo(new Config.Shutdown(Duration.ofSeconds(45)));
    assertThat(config.admin()).isEqualTo(new Config.Admin(19090));
    assertThat(config.classification())
        .isEqualTo(
            new Config.Classification(
                List.of("prefill-a", "prefill-b"), List.of("decode-a"), List.of("/v1/chat/completions"), false, false,
                PhaseHeaderPolicy.FALLBACK));
    assertThat(config.ordering())
        .isEqualTo(new Config.Ordering(Duration.ofMillis(750), Config.Fallback.PASSTHROUGH, true));
    assertThat(config.store())
        .isEqualTo(
            new Config.Store(
                Config.StoreType.MEMORY,
                Duration.ofMinutes(2),
                "rediss://user:secret@redis.example:6380/2",
                5000,
                "llm:usage:",
                Duration.ofMillis(20),
                true));
    assertThat(config.metadata().namespace()).isEqualTo("usage.fix-1");
    assertThat(config.limits()).isEqualTo(new Config.Limits(1024 * 1024, 256 * 1024, 4096, 128, 10_000));
  }

  @Test
  void emptyFileAndEmptySectionsKeepDefaults() throws Exception {
    assertThat(ConfigLoader.load(write("empty.yaml", ""), Map.of())).isEqualTo(Config.defaults());
    assertThat(ConfigLoader.fromYaml("grpc:\nstore: {}\n# nothing else\n")).isEqualTo(Config.defaults());
  }

  @Test
  void environmentOverridesTheFile() throws Exception {
    Path file = write("c.yaml", "grpc:\n  port: 1000\nordering:\n  context_wait: 1s\n");
    Map<String, String> env =
        Map.of(
            "DISAGG_USAGE_GRPC_PORT", "2000",
            "DISAGG_USAGE_CLASSIFICATION_CONTEXT_CLUSTERS", "a, b,,c ",
            "DISAGG_USAGE_STORE_TYPE", "MEMORY",
            "DISAGG_USAGE_LIMITS_MAX_BODY_BYTES", "2MiB",
            "DISAGG_USAGE_CLASSIFICATION_STRIP_ACCEPT_ENCODING", "FALSE",
            "HOME", "/home/app",
            "PATH", "/usr/bin");

    Config config = ConfigLoader.load(file, env);

    assertThat(config.grpc().port()).isEqualTo(2000);
    assertThat(config.ordering().contextWait()).isEqualTo(Duration.ofSeconds(1));
    assertThat(config.classification().contextClusters()).containsExactly("a", "b", "c");
    assertThat(config.classification().stripAcceptEncoding()).isFalse();
    assertThat(config.limits().maxBodyBytes()).isEqualTo(2 * 1024 * 1024);
  }

  @Test
  void emptyListVariableClearsTheList() throws Exception {
    Config config = ConfigLoader.load(null, Map.of("DISAGG_USAGE_CLASSIFICATION_PATHS", ""));
    assertThat(config.classification().paths()).isEmpty();
  }

  @Test
  void commandLineSettingsBeatEnvironmentAndFile() throws Exception {
    Path file = write("c.yaml", "grpc:\n  port: 1000\nadmin:\n  port: 1001\n");
    Map<String, String> env = Map.of("DISAGG_USAGE_GRPC_PORT", "2000", "DISAGG_USAGE_ADMIN_PORT", "2001");

    Config config =
        ConfigLoader.load(
            file,
            env,
            List.of(
                new Setting("grpc.port", "3000", "--grpc-port"),
                new Setting("metadata.namespace", "flagged", "--set metadata.namespace")));

    assertThat(config.grpc().port()).isEqualTo(3000);
    assertThat(config.admin().port()).isEqualTo(2001);
    assertThat(config.metadata().namespace()).isEqualTo("flagged");
  }

  @Test
  void everyKeyIsSettableByItsEnvironmentVariable() throws Exception {
    List<ConfigLoader.KeyInfo> keys = ConfigLoader.describeKeys();
    assertThat(keys).hasSize(ConfigLoader.keys().size()).hasSizeGreaterThanOrEqualTo(20);
    assertThat(keys.stream().map(ConfigLoader.KeyInfo::envName).distinct()).hasSize(keys.size());
    assertThat(ConfigLoader.envName("ordering.context_wait")).isEqualTo("DISAGG_USAGE_ORDERING_CONTEXT_WAIT");
    assertThat(ConfigLoader.envName("grpc.max_inbound_message_bytes"))
        .isEqualTo("DISAGG_USAGE_GRPC_MAX_INBOUND_MESSAGE_BYTES");

    // The formatted defaults, fed back through the environment, reproduce the defaults.
    Map<String, String> env = new HashMap<>();
    for (ConfigLoader.KeyInfo key : keys) {
      String value = key.defaultValue();
      if (value.startsWith("[")) {
        value = value.substring(1, value.length() - 1);
      }
      env.put(key.envName(), value);
    }
    assertThat(ConfigLoader.load(null, env)).isEqualTo(Config.defaults());

    // And each one really takes effect: a different value for every key changes the config.
    Map<String, String> changed = new LinkedHashMap<>();
    changed.put("grpc.port", "1");
    changed.put("grpc.max_inbound_message_bytes", "1KiB");
    changed.put("grpc.listen", "unix://" + dir.resolve("extproc.sock"));
    changed.put("grpc.keepalive_time", "0s");
    changed.put("grpc.keepalive_timeout", "3s");
    changed.put("grpc.permit_keepalive_time", "0s");
    changed.put("grpc.max_concurrent_streams", "100");
    changed.put("grpc.max_connection_idle", "5m");
    changed.put("grpc.envoy_message_timeout", "1s");
    changed.put("grpc.tls.cert_file", write("tls.crt", "cert").toString());
    changed.put("grpc.tls.key_file", write("tls.key", "key").toString());
    changed.put("grpc.tls.client_ca_file", write("ca.crt", "ca").toString());
    changed.put("grpc.tls.reload_interval", "250ms");
    changed.put("admin.port", "2");
    changed.put("classification.context_clusters", "ctx");
    changed.put("classification.generation_clusters", "gen");
    changed.put("classification.paths", "/x");
    changed.put("classification.strip_accept_encoding", "false");
    changed.put("classification.trust_id_header", "true");
    changed.put("classification.phase_header", "ignore");
    changed.put("ordering.context_wait", "3s");
    changed.put("ordering.fallback", "passthrough");
    changed.put("ordering.clamp_without_context", "false");
    changed.put("store.type", "memory");
    changed.put("store.ttl", "1h");
    changed.put("store.redis_uri", "redis://other:1");
    changed.put("store.max_entries", "7");
    changed.put("store.key_prefix", "p:");
    changed.put("store.redis_timeout", "9ms");
    changed.put("store.redis_cluster", "true");
    changed.put("metadata.namespace", "ns");
    changed.put("limits.max_body_bytes", "11");
    changed.put("limits.max_event_bytes", "12");
    changed.put("limits.max_usage_bytes", "13");
    changed.put("limits.max_key_bytes", "14");
    changed.put("limits.max_waiters", "15");
    changed.put("metrics.models", "m1,m2");
    changed.put("metrics.max_models", "5");
    changed.put("metrics.otlp.endpoint", "http://otel-collector:4318");
    changed.put("metrics.otlp.interval", "15s");
    changed.put("metrics.otlp.timeout", "2s");
    changed.put("metrics.otlp.headers", "x-tenant=a,authorization=Basic b");
    changed.put("logging.format", "json");
    changed.put("logging.level", "warn");
    changed.put("shutdown.drain_timeout", "0s");
    changed.put("streaming.inject_include_usage", "true");
    changed.put("edge_guard.enabled", "true");
    changed.put("edge_guard.remove_headers", "x-a");
    changed.put("edge_guard.remove_members", "a.b");
    changed.put("edge_guard.max_string_bytes", "99");
    assertThat(changed.keySet()).containsExactlyElementsOf(ConfigLoader.keys());
    Map<String, String> changedEnv = new HashMap<>();
    changed.forEach((key, value) -> changedEnv.put(ConfigLoader.envName(key), value));
    Config config = ConfigLoader.load(null, changedEnv);
    assertThat(config)
        .isEqualTo(
            new Config(
                new Config.Grpc(
                    1,
                    1024,
                    "unix://" + dir.resolve("extproc.sock"),
                    Duration.ZERO,
                    Duration.ofSeconds(3),
                    Duration.ZERO,
                    100,
                    Duration.ofMinutes(5),
                    Duration.ofSeconds(1),
                    new Config.Tls(
                        dir.resolve("tls.crt").toString(),
                        dir.resolve("tls.key").toString(),
                        dir.resolve("ca.crt").toString(),
                        Duration.ofMillis(250))),
                new Config.Admin(2),
                new Config.Classification(
                    List.of("ctx"), List.of("gen"), List.of("/x"), false, true, PhaseHeaderPolicy.IGNORE),
                new Config.Ordering(Duration.ofSeconds(3), Config.Fallback.PASSTHROUGH, false),
                new Config.Store(
                    Config.StoreType.MEMORY,
                    Duration.ofHours(1),
                    "redis://other:1",
                    7,
                    "p:",
                    Duration.ofMillis(9),
                    true),
                new Config.Metadata("ns"),
                new Config.Limits(11, 12, 13, 14, 15),
                new Config.Metrics(List.of("m1", "m2"), 5, new Config.Otlp("http://otel-collector:4318",
                    Duration.ofSeconds(15), Duration.ofSeconds(2), List.of("x-tenant=a", "authorization=Basic b"))),
                new Config.Logging(Config.LogFormat.JSON, Config.LogLevel.WARN),
                new Config.Shutdown(Duration.ZERO),
                new Config.Streaming(true),
                new Config.EdgeGuard(true, List.of("x-a"), List.of("a.b"), 99)));
  }

  /** A header entry is name=value; the message quotes the name part only, the value may be a secret. */
  @ParameterizedTest
  @org.junit.jupiter.params.provider.ValueSource(strings = {"Bearer s3cret", "x tenant=s3cret", "=s3cret"})
  void anOtlpHeaderThatIsNotNameEqualsValueIsRefusedWithoutItsValue(String header) {
    ConfigException e = failure(() -> ConfigLoader.load(null, Map.of(ConfigLoader.envName("metrics.otlp.headers"), header)));
    assertThat(e.getMessage()).contains("metrics.otlp.headers: each entry must be name=value").doesNotContain("s3cret");
  }

  @Test
  void reservedAndKubernetesServiceVariablesAreNotConfigKeys() throws Exception {
    Map<String, String> env =
        Map.of(
            "DISAGG_USAGE_CONFIG", "/etc/disagg/config.yaml",
            "DISAGG_USAGE_SERVICE_HOST", "10.0.0.7",
            "DISAGG_USAGE_SERVICE_PORT", "9002",
            "DISAGG_USAGE_SERVICE_PORT_GRPC", "9002",
            "DISAGG_USAGE_PORT", "tcp://10.0.0.7:9002",
            "DISAGG_USAGE_PORT_9002_TCP", "tcp://10.0.0.7:9002",
            "DISAGG_USAGE_PORT_9002_TCP_ADDR", "10.0.0.7");
    assertThat(ConfigLoader.load(null, env)).isEqualTo(Config.defaults());
  }

  @Test
  void unknownEnvironmentVariableIsNamed() {
    ConfigException e =
        failure(() -> ConfigLoader.load(null, Map.of("DISAGG_USAGE_NOPE", "1", "DISAGG_USAGE_GRPC_PORT", "1")));
    assertThat(e.problems()).hasSize(1);
    assertThat(e.getMessage()).startsWith("config error: unknown key DISAGG_USAGE_NOPE");
  }

  @Test
  void misspelledEnvironmentVariableGetsASuggestion() {
    ConfigException e = failure(() -> ConfigLoader.load(null, Map.of("DISAGG_USAGE_STORE_TLL", "5m")));
    assertThat(e.getMessage())
        .startsWith("config error: unknown key DISAGG_USAGE_STORE_TLL (did you mean DISAGG_USAGE_STORE_TTL?)");
  }

  @Test
  void unknownKeysInTheFileAreNamedWithTheirFullPath() throws Exception {
    Path file = write("typo.yaml", "store:\n  tll: 5m\nstroe:\n  ttl: 5m\nextra: 1\n");
    ConfigException e = failure(() -> ConfigLoader.load(file, Map.of()));
    assertThat(e.problems())
        .containsExactly(
            "unknown key store.tll (did you mean store.ttl?) (in " + file + ")",
            "unknown key stroe (did you mean store?) (in " + file + ")",
            "unknown key extra (in " + file + ")");
    assertThat(e.getMessage()).startsWith("config error: unknown key store.tll");
  }

  @Test
  void unknownCommandLineKeyIsNamed() {
    ConfigException e =
        failure(() -> ConfigLoader.load(null, Map.of(), List.of(new Setting("grpc.prot", "1", "--set grpc.prot"))));
    assertThat(e.getMessage())
        .isEqualTo("config error: unknown key grpc.prot (did you mean grpc.port?) (from --set grpc.prot)");
  }

  static Stream<Arguments> invalidValues() {
    return Stream.of(
        arguments(Map.of("grpc.port", "70000"), "grpc.port: must be between 0 and 65535"),
        arguments(Map.of("grpc.port", "-1"), "grpc.port: must be between 0 and 65535"),
        arguments(Map.of("admin.port", "http"), "admin.port: invalid integer \"http\""),
        arguments(Map.of("admin.port", "99999999999"), "admin.port: 99999999999 is out of range"),
        arguments(Map.of("grpc.port", "9100", "admin.port", "9100"), "admin.port: must differ from grpc.port"),
        arguments(Map.of("grpc.max_inbound_message_bytes", "0"), "grpc.max_inbound_message_bytes: must be positive"),
        arguments(Map.of("limits.max_body_bytes", "0"), "limits.max_body_bytes: must be positive"),
        arguments(Map.of("limits.max_event_bytes", "0KiB"), "limits.max_event_bytes: must be positive"),
        arguments(Map.of("limits.max_usage_bytes", "0"), "limits.max_usage_bytes: must be positive"),
        arguments(Map.of("limits.max_key_bytes", "0"), "limits.max_key_bytes: must be positive"),
        arguments(Map.of("limits.max_body_bytes", "16MB"), "limits.max_body_bytes: invalid size \"16MB\""),
        arguments(Map.of("limits.max_body_bytes", "4GiB"), "limits.max_body_bytes: 4GiB is out of range"),
        arguments(Map.of("store.max_entries", "0"), "store.max_entries: must be positive"),
        arguments(Map.of("limits.max_waiters", "-1"), "limits.max_waiters: must be 0 or more, got -1"),
        arguments(Map.of("store.max_entries", "lots"), "store.max_entries: invalid integer \"lots\""),
        arguments(Map.of("ordering.context_wait", "2 seconds"), "ordering.context_wait: invalid duration \"2 seconds\""),
        arguments(Map.of("ordering.context_wait", "0s"), "ordering.context_wait: must be positive"),
        arguments(Map.of("ordering.context_wait", "PT-1S"), "ordering.context_wait: must be positive"),
        arguments(
            Map.of("ordering.context_wait", "61m", "store.ttl", "2h"), "ordering.context_wait: must be at most 1h"),
        arguments(Map.of("ordering.fallback", "drop"), "ordering.fallback: invalid value \"drop\"; expected one of: passthrough"),
        arguments(Map.of("store.type", "mysql"), "store.type: invalid value \"mysql\"; expected one of: memory, redis"),
        arguments(Map.of("store.ttl", "2s"), "store.ttl: must be longer than ordering.context_wait (2s), got 2s"),
        arguments(Map.of("store.ttl", "forever"), "store.ttl: invalid duration \"forever\""),
        arguments(Map.of("metadata.namespace", ""), "metadata.namespace: must not be empty"),
        arguments(Map.of("metadata.namespace", "disagg usage"), "metadata.namespace: \"disagg usage\" must match"),
        arguments(Map.of("classification.paths", "/v1/chat/completions,v1/completions"),
            "classification.paths: \"v1/completions\" must start with /"),
        arguments(Map.of("classification.paths", "/v1/completions?stream=1"),
            "classification.paths: \"/v1/completions?stream=1\" must be a plain path"),
        arguments(Map.of("classification.strip_accept_encoding", "yes"),
            "classification.strip_accept_encoding: invalid boolean \"yes\""),
        arguments(
            Map.of("classification.context_clusters", "prefill,shared", "classification.generation_clusters", "decode,shared"),
            "classification.generation_clusters: \"shared\" is also listed in classification.context_clusters"),
        arguments(Map.of("store.type", "redis", "store.redis_uri", "http://redis:6379"),
            "store.redis_uri: \"http://redis:6379\" must be a redis://"),
        arguments(Map.of("store.type", "redis", "store.redis_uri", "redis://"), "store.redis_uri: invalid Redis URI \"redis://\""),
        arguments(Map.of("store.type", "redis", "store.redis_uri", "redis:///0"),
            "store.redis_uri: invalid Redis URI \"redis:///0\": Invalid URI, cannot get host"),
        arguments(Map.of("grpc.listen", "127.0.0.1:9002"),
            "grpc.listen: \"127.0.0.1:9002\" must be a host or address without a port (the port is grpc.port)"),
        arguments(Map.of("grpc.listen", "[::1]:9002"), "grpc.listen: \"[::1]:9002\" must be a host or address without a port"),
        arguments(Map.of("grpc.listen", "tcp://0.0.0.0"), "grpc.listen: \"tcp://0.0.0.0\" is not a host or a unix:// socket path"),
        arguments(Map.of("grpc.listen", "extproc host"), "grpc.listen: \"extproc host\" is not a valid host name or address"),
        arguments(Map.of("grpc.listen", "unix://run/extproc.sock"),
            "grpc.listen: \"unix://run/extproc.sock\" must be unix:// followed by an absolute path"),
        arguments(Map.of("grpc.listen", "unix:/run/extproc.sock"),
            "grpc.listen: \"unix:/run/extproc.sock\" must be unix:// followed by an absolute path"),
        arguments(Map.of("grpc.listen", "unix:///no/such/dir/extproc.sock"),
            "grpc.listen: the socket's directory /no/such/dir does not exist (it is not created"),
        arguments(Map.of("grpc.listen", "unix:///tmp/" + "s".repeat(100) + ".sock"),
            "grpc.listen: socket path is 110 bytes long; Unix socket paths are limited to 107 bytes"),
        arguments(Map.of("grpc.keepalive_time", "PT-1S"), "grpc.keepalive_time: must not be negative (0 turns it off)"),
        arguments(Map.of("grpc.keepalive_time", "25h"), "grpc.keepalive_time: must be at most 24h, got 25h"),
        arguments(Map.of("grpc.keepalive_timeout", "0s"), "grpc.keepalive_timeout: must be positive, got 0s"),
        arguments(Map.of("grpc.keepalive_timeout", "a while"), "grpc.keepalive_timeout: invalid duration \"a while\""),
        arguments(Map.of("grpc.permit_keepalive_time", "PT-5S"), "grpc.permit_keepalive_time: must not be negative"),
        arguments(Map.of("grpc.max_concurrent_streams", "-1"),
            "grpc.max_concurrent_streams: must not be negative (0 means no limit), got -1"),
        arguments(Map.of("grpc.max_concurrent_streams", "many"), "grpc.max_concurrent_streams: invalid integer \"many\""),
        arguments(Map.of("grpc.max_connection_idle", "48h"), "grpc.max_connection_idle: must be at most 24h, got 48h"),
        arguments(Map.of("grpc.envoy_message_timeout", "0s"), "grpc.envoy_message_timeout: must be at least 1ms, got 0s"),
        arguments(Map.of("grpc.envoy_message_timeout", "2h"), "grpc.envoy_message_timeout: must be at most 1h, got 2h"),
        arguments(Map.of("grpc.envoy_message_timeout", "0.2"), "grpc.envoy_message_timeout: invalid duration \"0.2\""),
        arguments(Map.of("grpc.tls.reload_interval", "10ms"), "grpc.tls.reload_interval: must be at least 100ms, got 10ms"),
        arguments(Map.of("grpc.tls.reload_interval", "2d"), "grpc.tls.reload_interval: invalid duration \"2d\""),
        arguments(Map.of("grpc.tls.cert_file", "/no/such/tls.crt", "grpc.tls.key_file", "/no/such/tls.key"),
            "grpc.tls.cert_file: file /no/such/tls.crt does not exist"),
        arguments(Map.of("grpc.tls.cert_file", "/no/such/tls.crt", "grpc.tls.key_file", "/no/such/tls.key"),
            "grpc.tls.key_file: file /no/such/tls.key does not exist"),
        arguments(Map.of("grpc.tls.client_ca_file", "/no/such/ca.crt"),
            "grpc.tls.client_ca_file: requires grpc.tls.cert_file and grpc.tls.key_file"),
        arguments(Map.of("grpc.tls.key_file", "/no/such/tls.key"),
            "grpc.tls.key_file: is set but grpc.tls.cert_file is not (set both or neither)"),
        arguments(Map.of("shutdown.drain_timeout", "2h"), "shutdown.drain_timeout: must be at most 1h, got 2h"),
        arguments(Map.of("shutdown.drain_timeout", "PT-1S"), "shutdown.drain_timeout: must not be negative"),
        arguments(Map.of("shutdown.drain_timeout", "30"), "shutdown.drain_timeout: invalid duration \"30\""),
        arguments(
            Map.of("store.type", "redis", "store.redis_uri", "redis-sentinel://s1:26379#mymaster", "store.redis_cluster", "true"),
            "store.redis_cluster: cannot be combined with a Sentinel store.redis_uri"),
        arguments(Map.of("store.key_prefix", ""), "store.key_prefix: \"\" must be 1 to 64 characters"),
        arguments(Map.of("store.key_prefix", "{tag}:"), "store.key_prefix: \"{tag}:\" must be 1 to 64 characters"),
        arguments(Map.of("store.redis_timeout", "0ms"), "store.redis_timeout: must be between 1ms and 5s, got 0s"),
        arguments(Map.of("store.redis_timeout", "10s"), "store.redis_timeout: must be between 1ms and 5s, got 10s"),
        arguments(Map.of("store.redis_cluster", "maybe"), "store.redis_cluster: invalid boolean \"maybe\""),
        arguments(Map.of("metrics.otlp.endpoint", "otel-collector:4318"),
            "metrics.otlp.endpoint: \"otel-collector:4318\" must be an http:// or https:// URL with a host"),
        arguments(Map.of("metrics.otlp.endpoint", "grpc://user:s3cret@otel-collector:4317"),
            "metrics.otlp.endpoint: \"grpc://***@otel-collector:4317\" must be an http:// or https:// URL"),
        arguments(Map.of("metrics.otlp.endpoint", "grpc://otel-collector:4317"),
            "metrics.otlp.endpoint: \"grpc://otel-collector:4317\" must be an http:// or https:// URL"),
        arguments(Map.of("metrics.otlp.endpoint", "http://otel collector"), "metrics.otlp.endpoint: \"http://otel collector\" is not a URL"),
        arguments(Map.of("metrics.otlp.interval", "100ms"), "metrics.otlp.interval: must be at least 1s, got 100ms"),
        arguments(Map.of("metrics.otlp.interval", "2h"), "metrics.otlp.interval: must be at most 1h, got 2h"),
        arguments(Map.of("metrics.otlp.timeout", "0s"), "metrics.otlp.timeout: must be positive, got 0s"));
  }

  @ParameterizedTest
  @MethodSource("invalidValues")
  void invalidEnvironmentValueNamesItsKeyAndVariable(Map<String, String> values, String expected) {
    Map<String, String> env = new HashMap<>();
    values.forEach((key, value) -> env.put(ConfigLoader.envName(key), value));
    ConfigException e = failure(() -> ConfigLoader.load(null, env));

    String key = expected.substring(0, expected.indexOf(':'));
    assertThat(e.getMessage()).contains("config error: " + expected);
    assertThat(e.problems())
        .filteredOn(p -> p.startsWith(key + ":"))
        .singleElement()
        .satisfies(p -> assertThat(p).endsWith("(from " + ConfigLoader.envName(key) + ")"));
  }

  @ParameterizedTest
  @MethodSource("invalidValues")
  void invalidFileValueNamesItsKeyAndFile(Map<String, String> values, String expected) throws Exception {
    StringBuilder yaml = new StringBuilder();
    Map<String, Map<String, String>> sections = new LinkedHashMap<>();
    values.forEach(
        (key, value) ->
            sections
                .computeIfAbsent(key.substring(0, key.indexOf('.')), s -> new LinkedHashMap<>())
                .put(key.substring(key.indexOf('.') + 1), value));
    sections.forEach(
        (section, fields) -> {
          yaml.append(section).append(":\n");
          fields.forEach(
              (field, value) -> {
                String yamlValue =
                    field.endsWith("clusters") || field.equals("paths")
                        ? Arrays.stream(value.split(","))
                            .map(item -> "\"" + item + "\"")
                            .collect(Collectors.joining(", ", "[", "]"))
                        : "\"" + value + "\"";
                yaml.append("  ").append(field).append(": ").append(yamlValue).append('\n');
              });
        });
    Path file = write("invalid.yaml", yaml.toString());

    ConfigException e = failure(() -> ConfigLoader.load(file, Map.of()));

    assertThat(e.getMessage()).contains("config error: " + expected);
    String key = expected.substring(0, expected.indexOf(':'));
    assertThat(e.problems())
        .filteredOn(p -> p.startsWith(key + ":"))
        .singleElement()
        .satisfies(p -> assertThat(p).endsWith("(in " + file + ")"));
  }

  @ParameterizedTest
  @CsvSource(
      delimiter = '|',
      textBlock =
          """
          grpc:\\n  port: true                     | grpc.port: expected an integer, got true
          grpc:\\n  port: 1.5                      | grpc.port: expected an integer, got 1.5
          grpc:\\n  port: [1]                      | grpc.port: expected an integer, got a list
          ordering:\\n  context_wait: 2            | ordering.context_wait: invalid duration 2 (a unit is required)
          classification:\\n  paths: /v1/x         | classification.paths: expected a list of strings, got "/v1/x"
          classification:\\n  paths: [{a: 1}]     | classification.paths: expected a list of strings, item 1 is a mapping
          classification:\\n  strip_accept_encoding: 1 | classification.strip_accept_encoding: expected true or false, got 1
          store:\\n  type: {name: redis}           | store.type: expected one of: memory, redis, got a mapping
          metadata:\\n  namespace: [a]             | metadata.namespace: expected a string, got a list
          grpc: 9002                               | grpc: expected a mapping, got 9002
          - grpc                                   | the top level must be a mapping of sections
          grpc:\\n  port: 1\\n  port: 2            | invalid YAML at line 3: Duplicate field
          grpc: [unclosed                          | invalid YAML at line
          """)
  void wrongTypesInTheFileNameTheirKey(String yaml, String expected) {
    ConfigException e = failure(() -> ConfigLoader.fromYaml(yaml.replace("\\n", "\n")));
    assertThat(e.getMessage()).startsWith("config error: " + expected);
  }

  @Test
  void transportKeysComeFromNestedYamlAndFromTheEnvironment() throws Exception {
    Path cert = write("tls.crt", "-----BEGIN CERTIFICATE-----\n");
    Path key = write("tls.key", "-----BEGIN PRIVATE KEY-----\n");
    Path ca = write("ca.crt", "-----BEGIN CERTIFICATE-----\n");
    Path file =
        write(
            "tls.yaml",
            """
            grpc:
              listen: unix://%s
              tls:
                cert_file: %s
                key_file: %s
                client_ca_file: %s
                reload_interval: 5s
            shutdown:
              drain_timeout: 1m
            """
                .formatted(dir.resolve("extproc.sock"), cert, key, ca));

    Config fromYaml = ConfigLoader.load(file, Map.of());
    assertThat(fromYaml.grpc().listen()).isEqualTo("unix://" + dir.resolve("extproc.sock"));
    assertThat(fromYaml.grpc().listenAddress().isUnix()).isTrue();
    assertThat(fromYaml.grpc().listenAddress().socketPath()).isEqualTo(dir.resolve("extproc.sock"));
    assertThat(fromYaml.grpc().tls())
        .isEqualTo(new Config.Tls(cert.toString(), key.toString(), ca.toString(), Duration.ofSeconds(5)));
    assertThat(fromYaml.grpc().tls().enabled()).isTrue();
    assertThat(fromYaml.grpc().tls().clientAuth()).isTrue();
    assertThat(fromYaml.shutdown().drainTimeout()).isEqualTo(Duration.ofMinutes(1));

    Config fromEnv =
        ConfigLoader.load(
            null,
            Map.of(
                "DISAGG_USAGE_GRPC_LISTEN", "::1",
                "DISAGG_USAGE_GRPC_TLS_CERT_FILE", cert.toString(),
                "DISAGG_USAGE_GRPC_TLS_KEY_FILE", key.toString(),
                "DISAGG_USAGE_GRPC_TLS_RELOAD_INTERVAL", "200ms",
                "DISAGG_USAGE_GRPC_KEEPALIVE_TIME", "1m",
                "DISAGG_USAGE_GRPC_KEEPALIVE_TIMEOUT", "20s",
                "DISAGG_USAGE_GRPC_PERMIT_KEEPALIVE_TIME", "5s",
                "DISAGG_USAGE_GRPC_MAX_CONCURRENT_STREAMS", "1000",
                "DISAGG_USAGE_GRPC_MAX_CONNECTION_IDLE", "1h",
                "DISAGG_USAGE_SHUTDOWN_DRAIN_TIMEOUT", "300ms"));
    assertThat(fromEnv.grpc().listenAddress()).isEqualTo(new ListenAddress(ListenAddress.Kind.HOST, "::1", null));
    assertThat(fromEnv.grpc().tls())
        .isEqualTo(new Config.Tls(cert.toString(), key.toString(), "", Duration.ofMillis(200)));
    assertThat(fromEnv.grpc().tls().clientAuth()).isFalse();
    assertThat(fromEnv.grpc().keepaliveTime()).isEqualTo(Duration.ofMinutes(1));
    assertThat(fromEnv.grpc().keepaliveTimeout()).isEqualTo(Duration.ofSeconds(20));
    assertThat(fromEnv.grpc().permitKeepaliveTime()).isEqualTo(Duration.ofSeconds(5));
    assertThat(fromEnv.grpc().maxConcurrentStreams()).isEqualTo(1000);
    assertThat(fromEnv.grpc().maxConnectionIdle()).isEqualTo(Duration.ofHours(1));
    assertThat(fromEnv.shutdown().drainTimeout()).isEqualTo(Duration.ofMillis(300));
  }

  @Test
  void transportDefaultsKeepThePlaintextListenerOnEveryInterface() throws Exception {
    Config.Grpc grpc = ConfigLoader.load(null, Map.of()).grpc();
    assertThat(grpc.listen()).isEmpty();
    assertThat(grpc.listenAddress().kind()).isEqualTo(ListenAddress.Kind.ALL_INTERFACES);
    assertThat(grpc.tls().enabled()).isFalse();
    assertThat(grpc.tls().reloadInterval()).isEqualTo(Duration.ofMinutes(1));
    assertThat(grpc.keepaliveTime()).isEqualTo(Duration.ofSeconds(30));
    assertThat(grpc.keepaliveTimeout()).isEqualTo(Duration.ofSeconds(10));
    assertThat(grpc.permitKeepaliveTime()).isEqualTo(Duration.ofSeconds(10));
    assertThat(grpc.maxConcurrentStreams()).isZero();
    assertThat(grpc.maxConnectionIdle()).isZero();
    assertThat(Config.defaults().shutdown().drainTimeout()).isEqualTo(Duration.ofSeconds(30));
    assertThat(ConfigLoader.describeKeys())
        .extracting(k -> List.of(k.key(), k.envName(), k.defaultValue()))
        .contains(
            List.of("grpc.tls.reload_interval", "DISAGG_USAGE_GRPC_TLS_RELOAD_INTERVAL", "1m"),
            List.of("shutdown.drain_timeout", "DISAGG_USAGE_SHUTDOWN_DRAIN_TIMEOUT", "30s"),
            List.of("grpc.max_concurrent_streams", "DISAGG_USAGE_GRPC_MAX_CONCURRENT_STREAMS", "0"));
  }

  @Test
  void tlsFileProblemsNameTheirKeyAndWhereTheValueCameFrom() throws Exception {
    Path cert = write("tls.crt", "x");
    Path key = write("tls.key", "x");
    Path certDir = Files.createDirectory(dir.resolve("certs"));

    ConfigException onlyCert =
        failure(() -> ConfigLoader.load(null, Map.of("DISAGG_USAGE_GRPC_TLS_CERT_FILE", cert.toString())));
    assertThat(onlyCert.problems())
        .containsExactly(
            "grpc.tls.cert_file: is set but grpc.tls.key_file is not (set both or neither)"
                + " (from DISAGG_USAGE_GRPC_TLS_CERT_FILE)");

    Path file =
        write(
            "dir-as-cert.yaml",
            "grpc:\n  tls:\n    cert_file: " + certDir + "\n    key_file: " + key + "\n");
    ConfigException directory = failure(() -> ConfigLoader.load(file, Map.of()));
    assertThat(directory.problems())
        .containsExactly("grpc.tls.cert_file: " + certDir + " is not a regular file (in " + file + ")");

    ConfigException caMissing =
        failure(
            () ->
                ConfigLoader.load(
                    null,
                    Map.of(
                        "DISAGG_USAGE_GRPC_TLS_CERT_FILE", cert.toString(),
                        "DISAGG_USAGE_GRPC_TLS_KEY_FILE", key.toString(),
                        "DISAGG_USAGE_GRPC_TLS_CLIENT_CA_FILE", dir.resolve("absent-ca.crt").toString())));
    assertThat(caMissing.problems())
        .containsExactly(
            "grpc.tls.client_ca_file: file "
                + dir.resolve("absent-ca.crt")
                + " does not exist (from DISAGG_USAGE_GRPC_TLS_CLIENT_CA_FILE)");

    ConfigException socketIsADirectory =
        failure(() -> ConfigLoader.load(null, Map.of("DISAGG_USAGE_GRPC_LISTEN", "unix://" + certDir)));
    assertThat(socketIsADirectory.problems())
        .containsExactly(
            "grpc.listen: " + certDir + " is a directory, not a socket path (from DISAGG_USAGE_GRPC_LISTEN)");
  }

  @Test
  void nestedSectionsReportUnknownKeysAndWrongShapesWithTheirFullPath() {
    ConfigException typo = failure(() -> ConfigLoader.fromYaml("grpc:\n  tls:\n    cert_fil: /x\n"));
    assertThat(typo.problems())
        .containsExactly("unknown key grpc.tls.cert_fil (did you mean grpc.tls.cert_file?) (in YAML)");

    ConfigException scalar = failure(() -> ConfigLoader.fromYaml("grpc:\n  tls: enabled\n"));
    assertThat(scalar.problems()).containsExactly("grpc.tls: expected a mapping, got \"enabled\" (in YAML)");

    ConfigException section = failure(() -> ConfigLoader.fromYaml("shutdown:\n  drain_timout: 5s\n"));
    assertThat(section.problems())
        .containsExactly("unknown key shutdown.drain_timout (did you mean shutdown.drain_timeout?) (in YAML)");
  }

  @Test
  void allProblemsAreReportedTogether() {
    Map<String, String> env =
        Map.of(
            "DISAGG_USAGE_GRPC_PORT", "70000",
            "DISAGG_USAGE_ORDERING_CONTEXT_WAIT", "soon",
            "DISAGG_USAGE_METADATA_NAMESPACE", "a b",
            "DISAGG_USAGE_NOPE", "1");
    ConfigException e = failure(() -> ConfigLoader.load(null, env));
    assertThat(e.problems())
        .hasSize(4)
        .anySatisfy(p -> assertThat(p).startsWith("grpc.port: must be between 0 and 65535"))
        .anySatisfy(p -> assertThat(p).startsWith("ordering.context_wait: invalid duration \"soon\""))
        .anySatisfy(p -> assertThat(p).startsWith("metadata.namespace: \"a b\" must match"))
        .anySatisfy(p -> assertThat(p).startsWith("unknown key DISAGG_USAGE_NOPE"));
    assertThat(e.getMessage().lines()).hasSize(4).allMatch(line -> line.startsWith("config error: "));
  }

  @Test
  void laterValidLayerRepairsAnEarlierInvalidOne() throws Exception {
    Path file = write("c.yaml", "ordering:\n  context_wait: 2 seconds\n");
    ConfigException e = failure(() -> ConfigLoader.load(file, Map.of()));
    assertThat(e.getMessage()).contains("ordering.context_wait: invalid duration \"2 seconds\"");

    // The file's error is still reported even when the environment sets the key again.
    ConfigException again =
        failure(() -> ConfigLoader.load(file, Map.of("DISAGG_USAGE_ORDERING_CONTEXT_WAIT", "3s")));
    assertThat(again.problems()).singleElement().asString().contains("(in " + file + ")");
  }

  @Test
  void missingFileIsAConfigError() {
    Path missing = dir.resolve("absent.yaml");
    ConfigException e = failure(() -> ConfigLoader.load(missing, Map.of()));
    assertThat(e.getMessage()).isEqualTo("config error: cannot read config file " + missing + ": no such file");
  }

  @ParameterizedTest
  @CsvSource({
    "250ms, PT0.25S",
    "2s, PT2S",
    "2S, PT2S",
    "' 90s ', PT1M30S",
    "1m, PT1M",
    "1h, PT1H",
    "1m30s, PT1M30S",
    "1h500ms, PT1H0.5S",
    "PT2S, PT2S",
    "pt0.5s, PT0.5S",
    "0s, PT0S"
  })
  void parsesDurations(String text, String iso) {
    assertThat(ConfigLoader.parseDuration(text)).isEqualTo(Duration.parse(iso));
  }

  @ParameterizedTest
  @ValueSource(strings = {"2 seconds", "", "2", "s", "1.5s", "-2s", "2d", "PT", "1h 30m", "99999999999999999999s"})
  void rejectsInvalidDurations(String text) {
    assertThatThrownBy(() -> ConfigLoader.parseDuration(text))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("invalid duration \"" + text + "\"");
  }

  @ParameterizedTest
  @CsvSource({"65536, 65536", "0, 0", "64KiB, 65536", "16MiB, 16777216", "16 mib, 16777216", "1GiB, 1073741824", "10B, 10"})
  void parsesSizes(String text, long bytes) {
    assertThat(ConfigLoader.parseSize(text)).isEqualTo(bytes);
  }

  @ParameterizedTest
  @ValueSource(strings = {"16MB", "-1", "1.5MiB", "", "KiB", "16 M"})
  void rejectsInvalidSizes(String text) {
    assertThatThrownBy(() -> ConfigLoader.parseSize(text))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("invalid size \"" + text + "\"");
  }

  @ParameterizedTest
  @CsvSource({"PT0.25S, 250ms", "PT2S, 2s", "PT1M, 1m", "PT1H, 1h", "PT1M30S, 90s", "PT0S, 0s"})
  void formatsDurationsInTheirShortForm(String iso, String text) {
    assertThat(ConfigLoader.formatDuration(Duration.parse(iso))).isEqualTo(text);
    assertThat(ConfigLoader.parseDuration(text)).isEqualTo(Duration.parse(iso));
  }
}
