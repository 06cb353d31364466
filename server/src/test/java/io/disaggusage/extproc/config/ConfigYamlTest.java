package io.disaggusage.extproc.config;

import io.disaggusage.extproc.classify.PhaseHeaderPolicy;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.config.ConfigLoader.Setting;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@link ConfigLoader#toYaml}: what {@code --print-config} prints reads back as the same configuration. */
class ConfigYamlTest {

  @TempDir Path dir;

  @Test
  void defaultsPrintInTheFormTheLoaderReadsAndReadBackEqual() throws Exception {
    String yaml = ConfigLoader.toYaml(Config.defaults());

    assertThat(ConfigLoader.fromYaml(yaml)).isEqualTo(Config.defaults());
    assertThat(yaml)
        .contains(
            "grpc:\n  port: 9002\n  max_inbound_message_bytes: 64MiB\n",
            "admin:\n  port: 9090\n",
            "  context_clusters: []\n",
            "  paths: [/v1/chat/completions, /v1/completions, /v1/responses, /v1/messages]\n",
            "  strip_accept_encoding: true\n",
            "  context_wait: 2s\n",
            "  fallback: passthrough\n",
            "  type: memory\n",
            "  ttl: 1m\n",
            "  redis_uri: redis://127.0.0.1:6379\n",
            "  max_entries: 100000\n",
            "  namespace: disagg_usage\n",
            "  max_body_bytes: 16MiB\n",
            "  max_event_bytes: 1MiB\n",
            "  max_usage_bytes: 64KiB\n",
            "  max_key_bytes: 256\n",
            "logging:\n  format: text\n  level: info\n");
  }

  @Test
  void everyKeyIsPrintedOnceGroupedBySectionInDocumentationOrder() {
    List<String> printed = new ArrayList<>();
    String section = null;
    for (String line : ConfigLoader.toYaml(Config.defaults()).split("\n")) {
      if (!line.startsWith(" ")) {
        section = line.substring(0, line.length() - 1);
      } else {
        printed.add(section + "." + line.trim().substring(0, line.trim().indexOf(':')));
      }
    }
    // Sections in the order they first appear in the key list, keys in key-list order within each.
    List<String> expected = new ArrayList<>();
    LinkedHashSet<String> sections = new LinkedHashSet<>();
    ConfigLoader.keys().forEach(k -> sections.add(k.substring(0, k.indexOf('.'))));
    for (String s : sections) {
      ConfigLoader.keys().stream().filter(k -> k.startsWith(s + ".")).forEach(expected::add);
    }
    assertThat(printed).containsExactlyElementsOf(expected);
    assertThat(printed).containsExactlyInAnyOrderElementsOf(ConfigLoader.keys());
  }

  @Test
  void awkwardValuesSurviveTheRoundTrip() throws Exception {
    Config d = Config.defaults();
    List<String> awkward =
        List.of(
            "prefill pool",
            "yes",
            "No",
            "off",
            "null",
            "~",
            "123",
            "0x1F",
            "1e3",
            "a:b",
            "x: y",
            "trailing:",
            "quote\"d",
            "back\\slash",
            "tab\there",
            "line\nbreak",
            "ünïcödé-池",
            "#hash",
            "- dash",
            "[bracket]",
            "{brace}",
            "comma,inside",
            "&anchor",
            "*alias",
            "!tag",
            "%percent",
            "@at",
            "`tick`",
            "'single'",
            " padded ",
            "zero\u200bwidth",
            "\u2028sep");
    Config config =
        new Config(
            new Config.Grpc(
                0,
                12345,
                "::1",
                Duration.ofSeconds(45),
                Duration.ofSeconds(5),
                Duration.ZERO,
                64,
                Duration.ofMinutes(5),
                Duration.ofMillis(350),
                new Config.Tls("", "", "", Duration.ofMillis(250))),
            new Config.Admin(65535),
            new Config.Classification(
                awkward, List.of("decode/a", "decode.b"), List.of("/v1/x", "/a:b", "/with#hash"), false, true,
                PhaseHeaderPolicy.IGNORE),
            new Config.Ordering(Duration.ofMillis(1500), Config.Fallback.PASSTHROUGH, true),
            new Config.Store(
                Config.StoreType.MEMORY,
                Duration.ofNanos(90_000_000_001L),
                "rediss://user:p@ss w#rd@redis.example:6380/2?x=\"y\"",
                5_000_000_000L,
                "usage.v2:",
                Duration.ofMillis(75),
                false),
            new Config.Metadata("usage.fix-1"),
            new Config.Limits(1536, 3 * 1024 * 1024, 1, Integer.MAX_VALUE, 0),
            new Config.Metrics(List.of("", "true", "meta-llama/Llama-3.1-8B-Instruct"), 0, Config.defaults().metrics().otlp()),
            new Config.Logging(Config.LogFormat.JSON, Config.LogLevel.OFF),
            new Config.Shutdown(Duration.ofSeconds(90)),
            new Config.Streaming(true),
            new Config.EdgeGuard(true, List.of("x-forged", "yes"), List.of("a.b", "true", "c"), 1536));

    String yaml = ConfigLoader.toYaml(config);

    assertThat(ConfigLoader.fromYaml(yaml)).isEqualTo(config);
    assertThat(yaml)
        .contains("  context_wait: 1500ms\n", "  max_body_bytes: 1536\n", "  max_event_bytes: 3MiB\n")
        .contains("  generation_clusters: [decode/a, decode.b]\n")
        .contains("\"yes\"", "\"123\"", "\"line\\nbreak\"", "\"quote\\\"d\"")
        .contains("logging:\n  format: json\n  level: \"off\"\n");
    assertThat(yaml.lines().count()).isEqualTo(ConfigLoader.keys().size() + sectionCount());
  }

  @Test
  void printedTextWorksAsAConfigFileUnderAnEmptyEnvironment() throws Exception {
    Config loaded =
        ConfigLoader.load(
            null,
            Map.of("DISAGG_USAGE_STORE_TTL", "5m", "DISAGG_USAGE_LOGGING_FORMAT", "JSON"),
            List.of(new Setting("classification.context_clusters", "p1, p2", "--set")));
    Path file = dir.resolve("printed.yaml");
    Files.writeString(file, ConfigLoader.toYaml(loaded));

    assertThat(ConfigLoader.load(file, Map.of())).isEqualTo(loaded);
    assertThat(loaded.store().ttl()).hasMinutes(5);
    assertThat(loaded.logging().format()).isEqualTo(Config.LogFormat.JSON);
    assertThat(loaded.classification().contextClusters()).containsExactly("p1", "p2");
  }

  @Test
  void logLevelVariableOfTheFlagWinsOverTheLoggingLevelKeyAndSettingsWinOverBoth() throws Exception {
    Path file = dir.resolve("c.yaml");
    Files.writeString(file, "logging:\n  level: error\n  format: json\n");

    assertThat(ConfigLoader.load(file, Map.of()).logging())
        .isEqualTo(new Config.Logging(Config.LogFormat.JSON, Config.LogLevel.ERROR));
    assertThat(ConfigLoader.load(file, Map.of("DISAGG_USAGE_LOGGING_LEVEL", "warn")).logging().level())
        .isEqualTo(Config.LogLevel.WARN);
    assertThat(
            ConfigLoader.load(
                    file, Map.of("DISAGG_USAGE_LOGGING_LEVEL", "warn", "DISAGG_USAGE_LOG_LEVEL", "Debug"))
                .logging()
                .level())
        .isEqualTo(Config.LogLevel.DEBUG);
    assertThat(
            ConfigLoader.load(
                    file,
                    Map.of("DISAGG_USAGE_LOG_LEVEL", "debug"),
                    List.of(new Setting("logging.level", "trace", "--log-level")))
                .logging()
                .level())
        .isEqualTo(Config.LogLevel.TRACE);
    // YAML 1.1 reads an unquoted off as false: still the level off.
    assertThat(ConfigLoader.fromYaml("logging:\n  level: off\n").logging().level())
        .isEqualTo(Config.LogLevel.OFF);
    // A blank variable is as good as unset.
    assertThat(ConfigLoader.load(file, Map.of("DISAGG_USAGE_LOG_LEVEL", " ")).logging().level())
        .isEqualTo(Config.LogLevel.ERROR);
  }

  @Test
  void describedTypesNameWhatEachKeyAccepts() {
    Map<String, String> types = new java.util.HashMap<>();
    ConfigLoader.describeKeys().forEach(k -> types.put(k.key(), k.type()));
    assertThat(types)
        .containsEntry("grpc.port", "integer")
        .containsEntry("grpc.max_inbound_message_bytes", "size")
        .containsEntry("ordering.context_wait", "duration")
        .containsEntry("classification.strip_accept_encoding", "boolean")
        .containsEntry("classification.paths", "list of strings")
        .containsEntry("store.redis_uri", "string")
        .containsEntry("store.type", "one of: memory, redis")
        .containsEntry("logging.format", "one of: text, json")
        .containsEntry("logging.level", "one of: trace, debug, info, warn, error, off");
  }

  private static long sectionCount() {
    return ConfigLoader.keys().stream().map(k -> k.substring(0, k.indexOf('.'))).distinct().count();
  }
}
