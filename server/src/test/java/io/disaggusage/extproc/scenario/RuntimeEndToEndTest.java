package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.Wire;
import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.config.ConfigLoader;
import io.disaggusage.extproc.runtime.ServerRuntime;
import io.disaggusage.extproc.driver.Chunking;
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
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The server as {@code java -jar} runs it (config from YAML, Netty listener, admin port), with the fake
 * Envoy in front: the wiring, not just the parts.
 */
class RuntimeEndToEndTest {

  @Test
  void configuredServerCorrectsUsageAndCountsIt() throws Exception {
    Config config =
        ServiceUnderTest.withTestMessageTimeout(ConfigLoader.fromYaml(
            """
            grpc:
              port: 0
            admin:
              port: 0
            classification:
              context_clusters: [prefill]
              generation_clusters: [decode]
            ordering:
              context_wait: 1s
            """));
    try (ServerRuntime runtime = ServerRuntime.start(config)) {
      ManagedChannel channel =
          NettyChannelBuilder.forAddress("127.0.0.1", runtime.grpcPort()).usePlaintext().build();
      try (FakeEnvoy envoy =
          FakeEnvoy.builder(channel)
              .config(ServiceUnderTest.shippedFilterConfig(config))
              .profile(EnvoyProfile.V1_37)
              .build()) {
        String body = "{\"model\":\"m\",\"stream\":true,\"bootstrap_host\":\"p0\",\"bootstrap_room\":123456789012345678}";
        String genStream = Wire.chatStream(Wire.usage(70, 6, 70L), "a", "b");
        ExchangeResult[] r =
            Flows.generationFirst(
                envoy,
                Exchange.post("/v1/chat/completions", body)
                    .requestAttribute("xds.cluster_name", "prefill")
                    .responseHeader("content-type", "application/json")
                    .responseBody(Wire.chatCompletion("p", Wire.usage(70, 1, 64L))),
                Exchange.post("/v1/chat/completions", body)
                    .requestAttribute("xds.cluster_name", "decode")
                    .responseHeader("content-type", "text/event-stream")
                    .responseBody(genStream)
                    .responseChunking(Chunking.fixed(23)));
        assertClean(r[0]);
        assertClean(r[1]);
        assertThat(r[1].clientResponse().bodyUtf8())
            .isEqualTo(genStream.replace("{\"cached_tokens\":70}", "{\"cached_tokens\":64}"));
      } finally {
        channel.shutdownNow().awaitTermination(2, TimeUnit.SECONDS);
      }
      String metrics =
          HttpClient.newHttpClient()
              .send(
                  HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + runtime.adminPort() + "/metrics")).build(),
                  HttpResponse.BodyHandlers.ofString())
              .body();
      assertThat(metrics)
          .contains("disagg_usage_exchanges_total{outcome=\"rewritten\",phase=\"generation\"} 1.0")
          .contains("disagg_usage_exchanges_total{outcome=\"stored\",phase=\"context\"} 1.0");
    }
  }
}
