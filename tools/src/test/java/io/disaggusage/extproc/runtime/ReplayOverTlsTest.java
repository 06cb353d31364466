package io.disaggusage.extproc.runtime;

import io.disaggusage.extproc.testkit.TestPki;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.cli.CommandRun;
import io.disaggusage.extproc.config.ConfigLoader;
import io.disaggusage.extproc.config.ConfigLoader.Setting;
import io.disaggusage.extproc.testkit.TestPki.Issued;
import io.disaggusage.extproc.testkit.TestPki.KeyFormat;
import io.disaggusage.extproc.emulator.engines.ScheduleOrder;
import io.disaggusage.extproc.tools.replay.ReplayFixtures;
import io.disaggusage.extproc.tools.replay.ReplayFixtures.Capture;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code replay --target} to a service that serves TLS, with the CA that signed its certificate. */
class ReplayOverTlsTest {
  @TempDir Path dir;

  @AfterEach
  void restoreLogging() {
    CommandRun.restoreLogging();
  }

  @Test
  void replaysOverTlsWithTheGivenCaAndCannotConnectInPlaintext() throws Exception {
    Issued ca = TestPki.ca("replay-test-ca");
    Issued server = TestPki.server(ca);
    Path cert = TestPki.writeCertificates(dir.resolve("tls.crt"), server.certificate());
    Path key = TestPki.writeKey(dir.resolve("tls.key"), server.keys(), KeyFormat.PKCS8);
    Path caFile = TestPki.writeCertificates(dir.resolve("ca.crt"), ca.certificate());
    List<Setting> settings =
        List.of(
            new Setting("grpc.port", "0", "test"),
            new Setting("admin.port", "0", "test"),
            new Setting("grpc.tls.cert_file", cert.toString(), "test"),
            new Setting("grpc.tls.key_file", key.toString(), "test"));
    Capture c = ReplayFixtures.tensorRtLlm(dir.resolve("capture"), ScheduleOrder.CONTEXT_FIRST, true);
    try (ServerRuntime runtime = ServerRuntime.start(ConfigLoader.load(null, Map.of(), settings))) {
      String target = "localhost:" + runtime.grpcPort();

      CommandRun tls = replay(c, "--target", target, "--tls-ca", caFile.toString());
      assertThat(tls.exitCode()).as(tls.out() + tls.err()).isZero();
      assertThat(tls.out()).contains(c.expectedClientBody()).contains("\nrewritten: cached_tokens ");

      CommandRun plaintext = replay(c, "--target", target);
      assertThat(plaintext.exitCode()).isEqualTo(1);
      assertThat(plaintext.err()).contains("replay: cannot connect to " + target + " (plaintext)");
    }
  }

  private static CommandRun replay(Capture c, String... more) {
    List<String> args =
        new ArrayList<>(
            List.of(
                "replay", "--message-timeout", "2s",
                "--context-request", c.contextRequest().toString(), "--context-response", c.contextResponse().toString(),
                "--generation-request", c.generationRequest().toString(),
                "--generation-response", c.generationResponse().toString()));
    args.addAll(List.of(more));
    return CommandRun.run(args.toArray(String[]::new));
  }
}
