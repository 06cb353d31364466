package io.disaggusage.extproc.emulator.envoy;

import io.disaggusage.extproc.driver.Chunking;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.bodyText;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.pass;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.replaceBody;
import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.util.Durations;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.MetadataOptions;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.HeaderSendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import java.net.InetSocketAddress;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The harness over real HTTP/2 on loopback, with the service's baseline filter config (§6). */
class FakeEnvoyNettyTest {
  private Server server;
  private ManagedChannel channel;
  private ScriptedProcessor processor;

  /**
   * A processor shaped like the product: streams the response body via mode_override (removing
   * content-length) only for chat completions, and rewrites it to upper case.
   */
  @BeforeEach
  void start() throws Exception {
    processor = new ScriptedProcessor((req, s) -> {
      if (req.hasRequestHeaders()) {
        String path = req.getRequestHeaders().getHeaders().getHeadersList().stream()
            .filter(h -> h.getKey().equals(":path")).findFirst().orElseThrow().getRawValue().toStringUtf8();
        s.state.put("rewrite", path.startsWith("/v1/chat/completions"));
        s.reply(pass(req));
      } else if (req.hasResponseHeaders() && Boolean.TRUE.equals(s.state.get("rewrite"))) {
        s.reply(ExtProcReplies.mutate(req, HeaderMutation.newBuilder().addRemoveHeaders("content-length").build())
            .toBuilder()
            .setModeOverride(ProcessingMode.newBuilder().setResponseBodyMode(BodySendMode.STREAMED))
            .build());
      } else if (req.hasResponseBody()) {
        s.reply(replaceBody(req, bodyText(req).toUpperCase(Locale.ROOT)));
      } else {
        s.reply(pass(req));
      }
    });
    server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
        .addService(processor).build().start();
    channel = NettyChannelBuilder.forAddress("127.0.0.1", server.getPort()).usePlaintext().build();
  }

  @AfterEach
  void stop() throws Exception {
    channel.shutdownNow().awaitTermination(2, TimeUnit.SECONDS);
    server.shutdownNow().awaitTermination(2, TimeUnit.SECONDS);
  }

  private static ExternalProcessor baselineConfig() {
    return ExternalProcessor.newBuilder()
        .setProcessingMode(ProcessingMode.newBuilder()
            .setRequestHeaderMode(HeaderSendMode.SEND).setResponseHeaderMode(HeaderSendMode.SEND)
            .setRequestTrailerMode(HeaderSendMode.SKIP).setResponseTrailerMode(HeaderSendMode.SKIP))
        .setAllowModeOverride(true)
        .setFailureModeAllow(true)
        .addRequestAttributes("xds.cluster_name")
        .setMessageTimeout(Durations.fromSeconds(2))
        .setMaxMessageTimeout(Durations.fromSeconds(5))
        .setMetadataOptions(MetadataOptions.newBuilder().setReceivingNamespaces(
            MetadataOptions.MetadataNamespaces.newBuilder().addUntyped("disagg_usage")))
        .build();
  }

  @Test
  void contextThenGenerationOverLoopbackHttp2() throws Exception {
    try (FakeEnvoy envoy = FakeEnvoy.builder(channel).config(baselineConfig()).profile(EnvoyProfile.V1_37).build()) {
      ExchangeResult context = envoy.execute(Exchange.post("/v1/chat/completions", "{\"prompt\":\"p\"}")
          .requestHeader("x-request-id", "r-1")
          .requestAttribute("xds.cluster_name", "context-pool")
          .responseHeader("content-type", "application/json")
          .responseBody("{\"usage\":{}}").responseContentLength()
          .build());
      ExchangeResult generation = envoy.execute(Exchange.post("/v1/chat/completions", "{\"prompt\":\"p\"}")
          .requestHeader("x-request-id", "r-1")
          .requestAttribute("xds.cluster_name", "generation-pool")
          .responseHeader("content-type", "text/event-stream")
          .responseBody("data: hello\n\ndata: [DONE]\n\n")
          .responseChunking(Chunking.random(42, 5).withEmptyFinalChunk())
          .build());

      assertThat(context.clientResponse().bodyUtf8()).isEqualTo("{\"USAGE\":{}}");
      assertThat(context.contentLengthMismatch()).isFalse();
      assertThat(generation.clientResponse().bodyUtf8()).isEqualTo("DATA: HELLO\n\nDATA: [DONE]\n\n");
      assertThat(generation.messagesSent().get(0).getAttributesOrThrow(ExtProcStream.ATTRIBUTES_KEY)
          .getFieldsOrThrow("xds.cluster_name").getStringValue()).isEqualTo("generation-pool");
      assertThat(processor.stream(1).cancelled.get(2, TimeUnit.SECONDS).getCode()).isEqualTo(Status.Code.CANCELLED);
      assertThat(envoy.stats().streamsStarted()).isEqualTo(2);
    }
  }

  @Test
  void concurrentGenerationFirstOverLoopbackHttp2() throws Exception {
    try (FakeEnvoy envoy = FakeEnvoy.builder(channel).config(baselineConfig()).profile(EnvoyProfile.V1_37).build()) {
      ExchangeHandle generation = envoy.start(Exchange.post("/v1/chat/completions", "{}").name("generation")
          .requestHeader("x-disagg-order", "concurrent")
          .responseBody("data: a\n\ndata: b\n\n").responseChunking(Chunking.fixed(4))
          .gateResponseBody().build());
      ExchangeHandle context = envoy.start(Exchange.post("/v1/chat/completions", "{}").name("context")
          .responseBody("{\"ctx\":1}").gateResponseBody().build());

      generation.awaitResponseHeadersForwarded();
      generation.releaseResponseChunks(2); // first event reaches the client first
      assertThat(generation.awaitClientBodyContaining("DATA: A")).startsWith("DATA: A");
      context.releaseResponseBody();
      ExchangeResult ctx = context.awaitResult();
      ExchangeResult gen = generation.releaseResponseBody().awaitResult();

      assertThat(ctx.clientResponse().bodyUtf8()).isEqualTo("{\"CTX\":1}");
      assertThat(gen.clientResponse().bodyUtf8()).isEqualTo("DATA: A\n\nDATA: B\n\n");
      assertThat(gen.clientResponse().complete()).isTrue();
    }
  }
}
