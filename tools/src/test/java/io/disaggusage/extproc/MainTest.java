package io.disaggusage.extproc;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.config.ConfigLoader;
import io.disaggusage.extproc.config.ConfigLoader.Setting;
import io.disaggusage.extproc.logging.Logging;
import io.disaggusage.extproc.runtime.ServerRuntime;
import io.disaggusage.extproc.testkit.FreePorts;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.assertj.core.api.AbstractStringAssert;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

class MainTest {

  @TempDir Path dir;

  /** One in-process run of the command line with captured output. */
  private record Run(int exitCode, String out, String err) {}

  private static Run run(Map<String, String> env, String... args) {
    return run(new Main(env), args);
  }

  private static Run run(Main main, String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    CommandLine commandLine = Main.commandLine(main);
    commandLine.setOut(new PrintWriter(out, true));
    commandLine.setErr(new PrintWriter(err, true));
    int exitCode = commandLine.execute(args);
    return new Run(exitCode, out.toString(), err.toString());
  }

  /** Asserts the run was refused with exit status 2 (a configuration or usage error); then its stderr. */
  private static AbstractStringAssert<?> assertRefused(Run run) {
    assertThat(run.exitCode()).as(run.err()).isEqualTo(2);
    return assertThat(run.err());
  }

  /** Asserts the run was refused with {@code config error: message} as its one line, and printed nothing else. */
  private static void assertConfigErrorLine(Run run, String message) {
    assertRefused(run).isEqualTo("config error: " + message + System.lineSeparator());
    assertThat(run.out()).isEmpty();
  }

  @Test
  void helpListsEveryFlagAndEveryKey() {
    Run run = run(Map.of(), "--help");

    assertThat(run.exitCode()).isZero();
    assertThat(run.out())
        .contains(
            "Usage: disagg-usage-extproc",
            "--config=FILE",
            "--grpc-port=PORT",
            "--admin-port=PORT",
            "--log-level=LEVEL",
            "--print-config",
            "--set=KEY=VALUE",
            "--help",
            "--version",
            "DISAGG_USAGE_CONFIG",
            "DISAGG_USAGE_GRPC_PORT",
            "DISAGG_USAGE_LOG_LEVEL",
            "DISAGG_USAGE_ORDERING_CONTEXT_WAIT");
    for (String key : ConfigLoader.keys()) {
      assertThat(run.out()).contains(key);
    }
    assertThat(run.err()).isEmpty();
  }

  @Test
  void versionNamesTheProgram() {
    Run run = run(Map.of(), "--version");
    assertThat(run.exitCode()).isZero();
    assertThat(run.out()).startsWith("disagg-usage-extproc ").contains("Java ");
  }

  @Test
  void badFlagValueExitsWithCode2AndNamesTheKey() {
    Run run = run(Map.of(), "--grpc-port", "70000");

    assertConfigErrorLine(run, "grpc.port: must be between 0 and 65535 (0 picks a free port), got 70000 (from --grpc-port)");
  }

  @Test
  void badEnvironmentValueExitsWithCode2WithoutStackTrace() {
    Run run = run(Map.of("DISAGG_USAGE_ORDERING_CONTEXT_WAIT", "2 seconds"));

    assertRefused(run)
        .startsWith("config error: ordering.context_wait: invalid duration \"2 seconds\"")
        .doesNotContain("Exception")
        .doesNotContain("\tat ");
  }

  @Test
  void unknownKeyInTheConfigFileNamedByEnvironmentExitsWithCode2() throws Exception {
    Path file = dir.resolve("config.yaml");
    Files.writeString(file, "store:\n  tll: 5m\n");

    Run run = run(Map.of("DISAGG_USAGE_CONFIG", file.toString()));

    assertRefused(run).startsWith("config error: unknown key store.tll");
  }

  @Test
  void configFlagWinsOverTheEnvironmentVariable() throws Exception {
    Path flagged = dir.resolve("flagged.yaml");
    Files.writeString(flagged, "ordering:\n  context_wait: 2 seconds\n");

    Run run =
        run(Map.of("DISAGG_USAGE_CONFIG", dir.resolve("absent.yaml").toString()), "--config", flagged.toString());

    // The error comes from the flagged file's content, not from the missing file the variable names.
    assertRefused(run)
        .startsWith("config error: ordering.context_wait: invalid duration \"2 seconds\"")
        .contains("(in " + flagged + ")")
        .doesNotContain("absent.yaml");
  }

  @Test
  void invalidLogLevelIsAConfigError() {
    Run run = run(Map.of(), "--log-level", "loud");
    assertConfigErrorLine(
        run, "logging.level: invalid value \"loud\"; expected one of: trace, debug, info, warn, error, off (from --log-level)");

    Run fromEnv = run(Map.of("DISAGG_USAGE_LOG_LEVEL", "loud"));
    assertRefused(fromEnv)
        .startsWith("config error: logging.level: invalid value \"loud\"")
        .contains("(from DISAGG_USAGE_LOG_LEVEL)");

    Run fromKey = run(Map.of("DISAGG_USAGE_LOGGING_FORMAT", "xml"));
    assertRefused(fromKey)
        .startsWith("config error: logging.format: invalid value \"xml\"; expected one of: text, json")
        .contains("(from DISAGG_USAGE_LOGGING_FORMAT)");
  }

  @Test
  void unknownOptionIsAUsageError() {
    Run run = run(Map.of(), "--grpc-prot=1");
    assertRefused(run).contains("Unknown option: '--grpc-prot=1'").contains("Run with --help for usage.");
  }

  @Test
  void aRedisUriLettuceRejectsIsAConfigErrorWithExitCode2() {
    Run run =
        run(
            Map.of(),
            "--grpc-port", "0", "--admin-port", "0",
            "--set", "store.type=redis",
            "--set", "store.redis_uri=redis-sentinel://127.0.0.1:26379");
    assertRefused(run)
        .startsWith("config error: store.redis_uri: invalid Redis URI \"redis-sentinel://127.0.0.1:26379\": "
            + "URI must contain the sentinelMasterId");
  }

  @Test
  void runsTheServerUntilShutdownAndExitsWith0() throws Exception {
    AtomicReference<ServerRuntime> started = new AtomicReference<>();
    Main main =
        new Main(
            Map.of("DISAGG_USAGE_METADATA_NAMESPACE", "from_env", "DISAGG_USAGE_GRPC_PORT", "1"),
            runtime -> {
              started.set(runtime);
              // Shut down from another thread, as the SIGTERM handler does.
              CompletableFuture.runAsync(runtime::close);
            });

    CompletableFuture<Run> run =
        CompletableFuture.supplyAsync(
            () -> run(main, "--grpc-port", "0", "--admin-port=0", "--set", "ordering.context_wait=500ms"));

    Run result = run.get(30, TimeUnit.SECONDS);
    assertThat(result.exitCode()).isZero();
    assertThat(result.err()).isEmpty();
    ServerRuntime runtime = started.get();
    assertThat(runtime.isTerminated()).isTrue();
    assertThat(runtime.config().grpc().port()).isZero();
    assertThat(runtime.config().metadata().namespace()).isEqualTo("from_env");
    assertThat(runtime.config().ordering().contextWait()).hasMillis(500);
  }

  /** What the build runs once to record the class-data archive: start, warm up, be ready, stop, exit 0. */
  @Test
  void exitWhenReadyStartsTheServerAndStopsItOnceReady() {
    AtomicReference<ServerRuntime> started = new AtomicReference<>();
    AtomicBoolean ready = new AtomicBoolean();
    Main main =
        new Main(
            Map.of(),
            runtime -> {
              started.set(runtime);
              ready.set(runtime.isReady());
            });

    Run run = run(main, "--exit-when-ready", "--grpc-port=0", "--admin-port=0");

    assertThat(run.exitCode()).isZero();
    assertThat(run.err()).isEmpty();
    assertThat(started.get()).as("the server was started").isNotNull();
    assertThat(ready).as("ready (warmed up, serving) when it was let go").isTrue();
    assertThat(started.get().isTerminated()).as("and stopped before the command returned").isTrue();
  }

  @Test
  void printConfigPrintsTheMergedConfigurationAndStartsNothing() throws Exception {
    Path file = dir.resolve("base.yaml");
    Files.writeString(file, "store:\n  ttl: 5m\nmetadata:\n  namespace: from_file\nlogging:\n  level: error\n");
    Map<String, String> env =
        Map.of(
            "DISAGG_USAGE_CONFIG", file.toString(),
            "DISAGG_USAGE_ORDERING_CONTEXT_WAIT", "750ms",
            "DISAGG_USAGE_METADATA_NAMESPACE", "from_env",
            "DISAGG_USAGE_LOG_LEVEL", "warn");
    AtomicBoolean started = new AtomicBoolean();
    Main main = new Main(env, runtime -> started.set(true));

    Run run =
        run(
            main,
            "--print-config",
            "--grpc-port",
            "7001",
            "--set",
            "classification.context_clusters=prefill-a,prefill-b",
            "-s",
            "logging.format=json",
            "--log-level",
            "debug");

    assertThat(run.exitCode()).isZero();
    assertThat(run.err()).isEmpty();
    assertThat(started).isFalse();
    assertThat(run.out())
        .startsWith("# disagg-usage-extproc ")
        .contains(
            "grpc:\n  port: 7001\n",
            "  context_clusters: [prefill-a, prefill-b]\n",
            "  context_wait: 750ms\n",
            "  ttl: 5m\n",
            "  namespace: from_env\n",
            "logging:\n  format: json\n  level: debug\n");
    // Exactly what the server would run with: file, then environment, then flags.
    Config printed = ConfigLoader.fromYaml(run.out());
    assertThat(printed)
        .isEqualTo(
            ConfigLoader.load(
                file,
                env,
                List.of(
                    new Setting("grpc.port", "7001", "--grpc-port"),
                    new Setting("classification.context_clusters", "prefill-a,prefill-b", "--set"),
                    new Setting("logging.format", "json", "--set"),
                    new Setting("logging.level", "debug", "--log-level"))));
    // And the printed text is a complete --config file on its own.
    Path printedFile = dir.resolve("printed.yaml");
    Files.writeString(printedFile, run.out());
    Run again = run(Map.of(), "--print-config", "--config", printedFile.toString());
    assertThat(again.exitCode()).isZero();
    assertThat(again.out()).isEqualTo(run.out());
  }

  @Test
  void printConfigAndConfigErrorsNeverShowASecret() {
    Map<String, String> env =
        Map.of(
            "DISAGG_USAGE_STORE_TYPE", "redis",
            "DISAGG_USAGE_STORE_REDIS_URI", "rediss://app-user:s3cret-redis@redis.example:6380/2",
            "DISAGG_USAGE_METRICS_OTLP_ENDPOINT", "https://otel:s3cret-endpoint@collector.example:4318",
            "DISAGG_USAGE_METRICS_OTLP_HEADERS", "authorization=Bearer s3cret-token,x-tenant=s3cret-tenant");
    Run printed = run(env, "--print-config");
    assertThat(printed.exitCode()).isZero();
    assertThat(printed.out())
        .contains("  redis_uri: \"rediss://***@redis.example:6380/2\"\n")
        .contains("  otlp.endpoint: \"https://***@collector.example:4318\"\n")
        .contains("  otlp.headers: [\"authorization=***\", \"x-tenant=***\"]\n")
        .doesNotContain("s3cret");

    Map<String, String> wrong = new java.util.HashMap<>(env);
    wrong.put("DISAGG_USAGE_STORE_REDIS_URI", "redis-sentinel://:s3cret-redis@s1:26379,s2:26379/0");
    Run refused = run(wrong, "--print-config");
    assertRefused(refused)
        .contains("store.redis_uri: invalid Redis URI \"redis-sentinel://***@s1:26379,s2:26379/0\": URI must contain the sentinelMasterId")
        .doesNotContain("s3cret");
    assertThat(refused.out()).doesNotContain("s3cret");
  }

  @Test
  void printConfigWithABadValueExitsWith2NamingTheKey() {
    Run run = run(Map.of("DISAGG_USAGE_STORE_TTL", "1s"), "--print-config");

    assertConfigErrorLine(run, "store.ttl: must be longer than ordering.context_wait (2s), got 1s (from DISAGG_USAGE_STORE_TTL)");
  }

  @Test
  void jsonLogFormatWritesTheStartupLineAsOneJsonObject() throws Exception {
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    PrintStream stdout = System.out;
    System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
    Run result;
    try {
      Main main = new Main(Map.of("DISAGG_USAGE_LOGGING_FORMAT", "json"), runtime -> CompletableFuture.runAsync(runtime::close));
      result =
          CompletableFuture.supplyAsync(() -> run(main, "--grpc-port", "0", "--admin-port", "0"))
              .get(30, TimeUnit.SECONDS);
    } finally {
      System.setOut(stdout);
      Logging.useFormat(Config.LogFormat.TEXT);
    }

    assertThat(result.exitCode()).isZero();
    String startup =
        captured.toString(StandardCharsets.UTF_8).lines()
            .filter(line -> line.contains(" started in "))
            .findFirst()
            .orElseThrow(() -> new AssertionError("no start-up line in " + captured));
    JsonNode line = new ObjectMapper().readTree(startup);
    assertThat(line.get("level").asText()).isEqualTo("INFO");
    assertThat(line.get("logger").asText()).isEqualTo(ServerRuntime.class.getName());
    assertThat(line.get("message").asText()).startsWith("disagg-usage-extproc ").contains("grpc port");
    assertThat(line.get("timestamp").asText()).matches("\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z");
    assertThat(line.has("thread")).isTrue();
  }

  /**
   * A server started with secrets in every key that takes them, Redis unreachable (so the store's
   * connection errors are logged too) and an OTLP exporter: nothing it writes, out or err, at DEBUG,
   * carries one of them.
   */
  @Test
  void noOutputOfARunningServerCarriesASecretItWasGiven() throws Exception {
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    PrintStream stdout = System.out;
    PrintStream stderr = System.err;
    PrintStream both = new PrintStream(captured, true, StandardCharsets.UTF_8);
    System.setOut(both);
    System.setErr(both);
    Run result;
    try {
      Map<String, String> env =
          Map.of(
              "DISAGG_USAGE_STORE_TYPE", "redis",
              "DISAGG_USAGE_STORE_REDIS_URI", "redis://app-user:s3cret-redis@127.0.0.1:" + FreePorts.next() + "/1",
              "DISAGG_USAGE_METRICS_OTLP_ENDPOINT", "http://otel:s3cret-endpoint@127.0.0.1:" + FreePorts.next(),
              "DISAGG_USAGE_METRICS_OTLP_HEADERS", "authorization=Bearer s3cret-token",
              "DISAGG_USAGE_LOGGING_LEVEL", "debug");
      // Up long enough for the store to fail to connect and log it, then shut down.
      Main main = new Main(env, runtime -> CompletableFuture.runAsync(() -> {
        try {
          Thread.sleep(1500);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        runtime.close();
      }));
      result = CompletableFuture.supplyAsync(() -> run(main, "--grpc-port", "0", "--admin-port", "0"))
          .get(60, TimeUnit.SECONDS);
    } finally {
      System.setOut(stdout);
      System.setErr(stderr);
      Logging.useFormat(Config.LogFormat.TEXT);
    }
    String output = captured.toString(StandardCharsets.UTF_8) + result.out() + result.err();
    assertThat(output).as("the server ran and logged").contains(" started in ");
    assertThat(output).doesNotContain("s3cret");
  }
}
