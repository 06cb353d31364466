package io.disaggusage.extproc.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.disaggusage.extproc.Main;
import io.disaggusage.extproc.config.ConfigException;
import io.disaggusage.extproc.testkit.FreePorts;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code --on-startup-failure}: exit (the default) or idle — print the message, serve nothing, exit with
 * the same status at SIGTERM. The idle runs are real processes, signalled as the kubelet signals them.
 */
class StartupFailureTest {
  @TempDir Path dir;

  @Test
  void flagWinsOverTheEnvironmentAndExitIsTheDefault() throws ConfigException {
    assertThat(StartupFailure.of(null, Map.of())).isEqualTo(StartupFailure.EXIT);
    assertThat(StartupFailure.of(null, Map.of("DISAGG_USAGE_ON_STARTUP_FAILURE", " IDLE "))).isEqualTo(StartupFailure.IDLE);
    assertThat(StartupFailure.of("exit", Map.of("DISAGG_USAGE_ON_STARTUP_FAILURE", "idle"))).isEqualTo(StartupFailure.EXIT);
  }

  @Test
  void anUnknownModeIsAConfigErrorNamingWhereItCameFrom() {
    assertThatThrownBy(() -> StartupFailure.of("wait", Map.of()))
        .isInstanceOf(ConfigException.class).hasMessageContaining("'wait'").hasMessageContaining("--on-startup-failure");
    assertThatThrownBy(() -> StartupFailure.of(null, Map.of("DISAGG_USAGE_ON_STARTUP_FAILURE", "later")))
        .isInstanceOf(ConfigException.class).hasMessageContaining("DISAGG_USAGE_ON_STARTUP_FAILURE");
  }

  @Test
  void aBadConfigIdlesServingNothingAndExitsWith2AtSigterm() throws Exception {
    int admin = FreePorts.next();
    Process p = start(List.of("--on-startup-failure=idle", "--admin-port=" + admin, "--set", "ordering.context_wait=soon"),
        Map.of());
    assertIdlesThenExitsAtSigterm(p, admin, Main.EXIT_CONFIG, "ordering.context_wait");
  }

  @Test
  void aFailedStartIdlesWhenTheEnvironmentSaysSoAndExitsWith1AtSigterm() throws Exception {
    int admin = FreePorts.next();
    try (ServerSocket taken = new ServerSocket()) {
      taken.bind(new InetSocketAddress(0));
      Process p = start(List.of("--grpc-port=" + taken.getLocalPort(), "--admin-port=" + admin),
          Map.of("DISAGG_USAGE_ON_STARTUP_FAILURE", "idle"));
      assertIdlesThenExitsAtSigterm(p, admin, Main.EXIT_STARTUP, "startup error");
    }
  }

  @Test
  void byDefaultABadConfigExitsAtOnce() throws Exception {
    Process p = start(List.of("--admin-port=0", "--grpc-port=0", "--set", "ordering.context_wait=soon"), Map.of());
    assertThat(p.waitFor(30, TimeUnit.SECONDS)).as("exited").isTrue();
    assertThat(p.exitValue()).isEqualTo(Main.EXIT_CONFIG);
  }

  private void assertIdlesThenExitsAtSigterm(Process p, int admin, int status, String message) throws Exception {
    Path err = dir.resolve("stderr.log");
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (!Files.readString(err, StandardCharsets.UTF_8).contains("idle (--on-startup-failure=idle)")) {
      assertThat(p.isAlive()).as("still running; stderr: %s", Files.readString(err)).isTrue();
      assertThat(System.nanoTime()).as("idle message within 30 s").isLessThan(deadline);
      Thread.sleep(50);
    }
    String printed = Files.readString(err, StandardCharsets.UTF_8);
    assertThat(printed).contains(message).contains("exits with status " + status);
    Thread.sleep(500);
    assertThat(p.isAlive()).as("idles rather than exiting").isTrue();
    assertThat(FreePorts.accepts(admin)).as("serves nothing: the admin port is closed").isFalse();
    p.destroy(); // SIGTERM
    assertThat(p.waitFor(30, TimeUnit.SECONDS)).as("exited after SIGTERM").isTrue();
    assertThat(p.exitValue()).isEqualTo(status);
  }

  private Process start(List<String> args, Map<String, String> env) throws IOException {
    List<String> command = new ArrayList<>(List.of(
        Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "-cp", System.getProperty("java.class.path"), Main.class.getName()));
    command.addAll(args);
    ProcessBuilder pb = new ProcessBuilder(command)
        .redirectOutput(ProcessBuilder.Redirect.DISCARD)
        .redirectError(dir.resolve("stderr.log").toFile());
    pb.environment().keySet().removeIf(k -> k.startsWith("DISAGG_USAGE_"));
    pb.environment().putAll(env);
    Process p = pb.start();
    Runtime.getRuntime().addShutdownHook(new Thread(p::destroyForcibly));
    return p;
  }
}
