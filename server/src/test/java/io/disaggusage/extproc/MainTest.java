package io.disaggusage.extproc;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.config.ConfigLoader;
import io.disaggusage.extproc.runtime.ServerRuntime;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
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

    assertThat(run.exitCode()).isEqualTo(2);
    assertThat(run.err())
        .isEqualTo(
            "config error: grpc.port: must be between 0 and 65535 (0 picks a free port), got 70000"
                + " (from --grpc-port)"
                + System.lineSeparator());
    assertThat(run.out()).isEmpty();
  }

  @Test
  void badEnvironmentValueExitsWithCode2WithoutStackTrace() {
    Run run = run(Map.of("DISAGG_USAGE_ORDERING_CONTEXT_WAIT", "2 seconds"));

    assertThat(run.exitCode()).isEqualTo(2);
    assertThat(run.err())
        .startsWith("config error: ordering.context_wait: invalid duration \"2 seconds\"")
        .doesNotContain("Exception")
        .doesNotContain("\tat ");
  }

  @Test
  void unknownKeyInTheConfigFileNamedByEnvironmentExitsWithCode2() throws Exception {
    Path file = dir.resolve("config.yaml");
    Files.writeString(file, "store:\n  tll: 5m\n");

    Run run = run(Map.of("DISAGG_USAGE_CONFIG", file.toString()));

    assertThat(run.exitCode()).isEqualTo(2);
    assertThat(run.err()).startsWith("config error: unknown key store.tll");
  }

  @Test
  void configFlagWinsOverTheEnvironmentVariable() throws Exception {
    Path flagged = dir.resolve("flagged.yaml");
    Files.writeString(flagged, "ordering:\n  context_wait: 2 seconds\n");

    Run run =
        run(Map.of("DISAGG_USAGE_CONFIG", dir.resolve("absent.yaml").toString()), "--config", flagged.toString());

    // The error comes from the flagged file's content, not from the missing file the variable names.
    assertThat(run.exitCode()).isEqualTo(2);
    assertThat(run.err())
        .startsWith("config error: ordering.context_wait: invalid duration \"2 seconds\"")
        .contains("(in " + flagged + ")")
        .doesNotContain("absent.yaml");
  }

  @Test
  void invalidLogLevelIsAConfigError() {
    Run run = run(Map.of(), "--log-level", "loud");
    assertThat(run.exitCode()).isEqualTo(2);
    assertThat(run.err()).startsWith("config error: --log-level: invalid log level \"loud\"");

    Run fromEnv = run(Map.of("DISAGG_USAGE_LOG_LEVEL", "loud"));
    assertThat(fromEnv.exitCode()).isEqualTo(2);
    assertThat(fromEnv.err()).startsWith("config error: DISAGG_USAGE_LOG_LEVEL: invalid log level");
  }

  @Test
  void unknownOptionIsAUsageError() {
    Run run = run(Map.of(), "--grpc-prot=1");
    assertThat(run.exitCode()).isEqualTo(2);
    assertThat(run.err()).contains("Unknown option: '--grpc-prot=1'").contains("Run with --help for usage.");
  }

  @Test
  void redisUriLettuceRejectsFailsAtStartupWithExitCode1() {
    Run run =
        run(
            Map.of(),
            "--grpc-port", "0", "--admin-port", "0",
            "--set", "store.type=redis",
            "--set", "store.redis_uri=redis-sentinel://127.0.0.1:26379");
    assertThat(run.exitCode()).isEqualTo(1);
    assertThat(run.err())
        .isEqualTo(
            "startup error: store.redis_uri: invalid Redis URI redis-sentinel://127.0.0.1:26379: "
                + "URI must contain the sentinelMasterId"
                + System.lineSeparator());
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
}
