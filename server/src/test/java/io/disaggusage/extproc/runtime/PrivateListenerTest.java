package io.disaggusage.extproc.runtime;

import io.disaggusage.extproc.testkit.TestPki;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.testkit.TestPki.Issued;
import io.disaggusage.extproc.testkit.TestPki.KeyFormat;
import io.disaggusage.extproc.warmup.Warmup;
import io.grpc.netty.shaded.io.netty.channel.epoll.Epoll;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The start-up warm-up through the listener's private twin, for each kind of listener: its exchanges
 * cross the same transport and come out corrected, and nothing is left behind.
 */
class PrivateListenerTest {
  @TempDir Path dir;

  private final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();

  @AfterEach
  void stopTimer() {
    timer.shutdownNow();
  }

  @Test
  void tcp() throws Exception {
    assertWarmsUpAndSelfChecks(ServerRuntimeTest.config());
  }

  @Test
  void unixSocket() throws Exception {
    Assumptions.assumeTrue(Epoll.isAvailable(), "Netty's native epoll transport is unavailable here");
    Path socket = dir.resolve("extproc.sock");
    PrivateListener twin = assertWarmsUpAndSelfChecks(ServerRuntimeTest.config("grpc.listen=unix://" + socket));
    assertThat(twin.socketDirectory()).isNotNull().doesNotExist();
    assertThat(socket).doesNotExist(); // the real listener's socket is never touched
  }

  @Test
  void tls() throws Exception {
    assertWarmsUpAndSelfChecks(ServerRuntimeTest.config(tlsSettings(false)));
  }

  @Test
  void mutualTlsTwinAsksNoClientCertificate() throws Exception {
    assertWarmsUpAndSelfChecks(ServerRuntimeTest.config(tlsSettings(true)));
  }

  private PrivateListener assertWarmsUpAndSelfChecks(Config config) throws Exception {
    try (GrpcListener listener = GrpcListener.prepare(config.grpc())) {
      PrivateListener twin = new PrivateListener(listener, (builder, extProc, health) -> builder.addService(extProc).addService(health));
      try (Warmup warmup = Warmup.run(config, timer, twin)) {
        assertThat(warmup.result().problem()).isNull();
        assertThat(warmup.result().uncorrected()).isEmpty();
        assertThat(warmup.result().exchanges()).isPositive();
      }
      return twin;
    }
  }

  private String[] tlsSettings(boolean clientAuth) throws Exception {
    Issued ca = TestPki.ca("warmup-test-ca");
    Issued server = TestPki.server(ca);
    List<String> settings = new ArrayList<>();
    settings.add("grpc.tls.cert_file=" + TestPki.writeCertificates(dir.resolve("tls.crt"), server.certificate()));
    settings.add("grpc.tls.key_file=" + TestPki.writeKey(dir.resolve("tls.key"), server.keys(), KeyFormat.TRADITIONAL));
    if (clientAuth) {
      settings.add("grpc.tls.client_ca_file=" + TestPki.writeCertificates(dir.resolve("ca.crt"), ca.certificate()));
    }
    return settings.toArray(String[]::new);
  }

}
