package io.disaggusage.extproc.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.driver.FilterConfigs;
import io.disaggusage.extproc.emulator.envoy.EnvoyProfile;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.emulator.envoy.FakeEnvoy;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** {@code edge_guard.enabled: true}: the same port serves the edge guard, and /metrics counts it. */
class EdgeGuardRoleTest {
  private ServerRuntime runtime;
  private ManagedChannel channel;

  @AfterEach
  void tearDown() throws InterruptedException {
    RuntimeTeardown.close(channel == null ? List.of() : List.of(channel), runtime);
  }

  @Test
  void theEdgeRoleStripsOnTheExtProcPortAndCountsOnMetrics() throws Exception {
    runtime = ServerRuntime.start(ServerRuntimeTest.config("edge_guard.enabled=true", "store.type=redis",
        "store.redis_uri=redis://127.0.0.1:1"));
    assertThat(runtime.isReady()).as("no Redis is asked for by the edge role").isTrue();
    channel = NettyChannelBuilder.forAddress("127.0.0.1", runtime.grpcPort()).usePlaintext().build();
    Path bootstrap = Path.of(System.getProperty("project.root", "..")).resolve("deploy/envoy/edge-guard/envoy.yaml");
    try (FakeEnvoy envoy =
        FakeEnvoy.builder(channel)
            .config(FilterConfigs.withMessageTimeout(FilterConfigs.parse(Files.readString(bootstrap)), Duration.ofSeconds(2)))
            .profile(EnvoyProfile.V1_37)
            .build()) {
      ExchangeResult result =
          envoy.execute(
              Exchange.post("/v1/completions", "{\"prompt\":\"p\",\"bootstrap_host\":\"h\"}")
                  .requestHeader("x-disagg-phase", "generation")
                  .build());
      assertThat(result.upstreamRequest().bodyUtf8()).isEqualTo("{\"prompt\":\"p\"}");
      assertThat(result.upstreamRequest().headers().contains("x-disagg-phase")).isFalse();
    }
    String metrics =
        HttpClient.newHttpClient()
            .send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + runtime.adminPort() + "/metrics")).build(),
                HttpResponse.BodyHandlers.ofString())
            .body();
    assertThat(metrics)
        .contains("disagg_usage_edge_requests_total{outcome=\"stripped\"} 1.0")
        .contains("disagg_usage_edge_removed_members_total{path=\"bootstrap_host\"} 1.0")
        .contains("disagg_usage_edge_removed_headers_total{header=\"x-disagg-phase\"} 1.0")
        .contains("disagg_usage_edge_rejected_bodies_total{reason=\"malformed\"} 0.0");
  }
}
