package io.disaggusage.extproc.emulator.envoy;

import io.disaggusage.extproc.driver.Chunking;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.REQUEST_BODY;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.REQUEST_HEADERS;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.RESPONSE_BODY;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.RESPONSE_HEADERS;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.RESPONSE_TRAILERS;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.envoyproxy.envoy.config.core.v3.GrpcService;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.HeaderSendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.grpc.Status;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Shape of the ProcessingRequests and the stream lifecycle (checklist items 1–7, 30). */
class FakeEnvoyProtocolTest extends FakeEnvoyTestSupport {

  @Test
  void headerMessagesCarryLowerCasePseudoHeadersRawValuesAndEndOfStream() throws Exception {
    FakeEnvoy envoy = passThroughEnvoy(baseline().build());

    ExchangeResult r = envoy.execute(Exchange.builder()
        .method("GET").path("/v1/models").authority("llm.local")
        .requestHeader("X-Trace", "a").requestHeader("x-trace", "b")
        .responseHeader("Content-Type", "application/json")
        .build());

    assertThat(cases(r.messagesSent())).containsExactly(REQUEST_HEADERS, RESPONSE_HEADERS);
    ProcessingRequest first = r.messagesSent().get(0);
    ProcessingRequest second = r.messagesSent().get(1);
    assertThat(first.hasProtocolConfig()).isTrue();
    assertThat(second.hasProtocolConfig()).isFalse();
    assertThat(first.hasMetadataContext()).isTrue();
    assertThat(second.hasMetadataContext()).isTrue();
    assertThat(first.getRequestHeaders().getEndOfStream()).isTrue();
    assertThat(second.getResponseHeaders().getEndOfStream()).isTrue();
    List<HeaderValue> sent = first.getRequestHeaders().getHeaders().getHeadersList();
    assertThat(sent).extracting(HeaderValue::getKey)
        .containsExactly(":method", ":path", ":authority", ":scheme", "x-trace", "x-trace");
    assertThat(sent).allSatisfy(h -> assertThat(h.getValue()).isEmpty());
    assertThat(sent.get(1).getRawValue().toStringUtf8()).isEqualTo("/v1/models");
    assertThat(second.getResponseHeaders().getHeaders().getHeaders(0).getKey()).isEqualTo(":status");
    assertThat(second.getResponseHeaders().getHeaders().getHeaders(1).getKey()).isEqualTo("content-type");

    assertThat(r.clientResponse().status()).isEqualTo(200);
    assertThat(r.clientResponse().complete()).isTrue();
    assertThat(r.upstreamRequest().headers().getAll("x-trace")).containsExactly("a", "b");
    assertThat(r.stats().streamsStarted()).isEqualTo(1);
    assertThat(r.stats().streamMsgsSent()).isEqualTo(2);
    assertThat(r.stats().streamMsgsReceived()).isEqualTo(2);
    assertThat(r.stats().streamsClosed()).isEqualTo(1);
    assertThat(envoy.stats().streamsStarted()).isEqualTo(1);
  }

  @Test
  void protocolConfigCarriesEffectiveBodyModes() throws Exception {
    FakeEnvoy envoy = passThroughEnvoy(withModes(BodySendMode.NONE, BodySendMode.STREAMED).build());

    ExchangeResult r = envoy.execute(Exchange.post("/v1/completions", "{}").responseBody("x").build());

    ProcessingRequest first = r.messagesSent().get(0);
    assertThat(first.getProtocolConfig().getRequestBodyMode()).isEqualTo(BodySendMode.NONE);
    assertThat(first.getProtocolConfig().getResponseBodyMode()).isEqualTo(BodySendMode.STREAMED);
    assertThat(r.messagesSent().stream().skip(1).noneMatch(ProcessingRequest::hasProtocolConfig)).isTrue();
  }

  @Test
  void attributesOnlyOnFirstMessageOfEachDirectionWithTypingAndOmission() throws Exception {
    ScriptedProcessor server = ScriptedProcessor.passThrough();
    ExternalProcessor config = withModes(BodySendMode.STREAMED, BodySendMode.STREAMED)
        .addRequestAttributes("xds.cluster_name")
        .addRequestAttributes("request.path")
        .addRequestAttributes("unknown.attribute")
        .addResponseAttributes("response.code")
        .addResponseAttributes("xds.cluster_name")
        .build();
    FakeEnvoy envoy = envoy(server, config, EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/v1/chat/completions", "{\"a\":1}")
        .requestChunking(Chunking.fixed(3))
        .requestAttribute("xds.cluster_name", "context-pool")
        .responseBody("data: x\n\n")
        .responseChunking(Chunking.fixed(4))
        .build());

    List<ProcessingRequest> msgs = r.messagesSent();
    ProcessingRequest reqHeaders = msgs.get(0);
    var reqAttrs = reqHeaders.getAttributesOrThrow(ExtProcStream.ATTRIBUTES_KEY);
    assertThat(reqAttrs.getFieldsOrThrow("xds.cluster_name").getStringValue()).isEqualTo("context-pool");
    assertThat(reqAttrs.getFieldsOrThrow("request.path").getStringValue()).isEqualTo("/v1/chat/completions");
    assertThat(reqAttrs.containsFields("unknown.attribute")).isFalse();
    ProcessingRequest respHeaders =
        msgs.stream().filter(ProcessingRequest::hasResponseHeaders).findFirst().orElseThrow();
    var respAttrs = respHeaders.getAttributesOrThrow(ExtProcStream.ATTRIBUTES_KEY);
    assertThat(respAttrs.getFieldsOrThrow("response.code").getNumberValue()).isEqualTo(200.0);
    assertThat(msgs.stream().filter(m -> m.getAttributesCount() > 0)).hasSize(2);
    assertThat(msgs.stream().filter(ProcessingRequest::hasRequestBody)).hasSizeGreaterThan(1);
  }

  @Test
  void noStreamWhenEveryPhaseIsSkipped() throws Exception {
    ScriptedProcessor server = ScriptedProcessor.passThrough();
    ExternalProcessor.Builder config = baseline();
    config.getProcessingModeBuilder()
        .setRequestHeaderMode(HeaderSendMode.SKIP).setResponseHeaderMode(HeaderSendMode.SKIP);
    FakeEnvoy envoy = envoy(server, config.build(), EnvoyProfile.V1_37);

    ExchangeResult r = envoy.execute(Exchange.post("/v1/completions", "{}").responseBody("ok").build());

    assertThat(r.streamEnd()).isEqualTo(ExchangeResult.StreamEnd.NOT_OPENED);
    assertThat(r.messagesSent()).isEmpty();
    assertThat(r.stats().streamsStarted()).isZero();
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("ok");
    assertThat(server.streams()).isEmpty();
  }

  @Test
  void streamOpensLazilyAtResponseTimeWhenRequestPhasesAreSkipped() throws Exception {
    ScriptedProcessor server = ScriptedProcessor.passThrough();
    ExternalProcessor.Builder config = baseline();
    config.getProcessingModeBuilder().setRequestHeaderMode(HeaderSendMode.SKIP);
    FakeEnvoy envoy = envoy(server, config.addRequestAttributes("request.path").build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/v1/completions", "{}").build());

    assertThat(cases(r.messagesSent())).containsExactly(RESPONSE_HEADERS);
    assertThat(r.messagesSent().get(0).hasProtocolConfig()).isTrue();
    // request attributes are never sent: no request-direction message exists
    assertThat(r.messagesSent().get(0).getAttributesCount()).isZero();
  }

  @Test
  void trailersOnlyWhenTheyExistAndModeIsSend() throws Exception {
    ScriptedProcessor server = ScriptedProcessor.passThrough();
    ExternalProcessor.Builder config = withModes(BodySendMode.NONE, BodySendMode.BUFFERED);
    config.getProcessingModeBuilder()
        .setRequestTrailerMode(HeaderSendMode.SKIP).setResponseTrailerMode(HeaderSendMode.SEND);
    FakeEnvoy envoy = envoy(server, config.build(), EnvoyProfile.V1_36);

    ExchangeResult withTrailers = envoy.execute(Exchange.post("/rpc", "req")
        .requestTrailer("x-req-trailer", "1")
        .responseBody("resp").responseTrailer("grpc-status", "0")
        .build());

    assertThat(cases(withTrailers.messagesSent()))
        .containsExactly(REQUEST_HEADERS, RESPONSE_HEADERS, RESPONSE_BODY, RESPONSE_TRAILERS);
    ProcessingRequest body = withTrailers.messagesSent().get(2);
    assertThat(body.getResponseBody().getEndOfStream()).isFalse();
    assertThat(withTrailers.upstreamRequest().trailers().get("x-req-trailer")).contains("1");
    assertThat(withTrailers.clientResponse().trailers().get("grpc-status")).contains("0");
    assertThat(withTrailers.clientResponse().bodyUtf8()).isEqualTo("resp");

    ExchangeResult without = envoy.execute(Exchange.post("/rpc", "req").responseBody("resp").build());
    assertThat(cases(without.messagesSent()))
        .containsExactly(REQUEST_HEADERS, RESPONSE_HEADERS, RESPONSE_BODY);
    assertThat(without.messagesSent().get(2).getResponseBody().getEndOfStream()).isTrue();
  }

  @Test
  void emptyFinalChunkIsSentWithEndOfStream() throws Exception {
    FakeEnvoy envoy = passThroughEnvoy(withModes(BodySendMode.STREAMED, BodySendMode.STREAMED).build());

    ExchangeResult r = envoy.execute(Exchange.post("/v1/completions", "abcdef")
        .requestChunking(Chunking.fixed(3).withEmptyFinalChunk())
        .responseBody("xyz")
        .responseChunking(Chunking.whole().withEmptyFinalChunk())
        .build());

    List<ProcessingRequest> reqBodies =
        r.messagesSent().stream().filter(ProcessingRequest::hasRequestBody).toList();
    assertThat(reqBodies).extracting(m -> m.getRequestBody().getBody().toStringUtf8())
        .containsExactly("abc", "def", "");
    assertThat(reqBodies).extracting(m -> m.getRequestBody().getEndOfStream())
        .containsExactly(false, false, true);
    assertThat(r.upstreamRequest().bodyUtf8()).isEqualTo("abcdef");
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("xyz");
    assertThat(r.messagesSent().stream().filter(ProcessingRequest::hasResponseBody)).hasSize(2);
  }

  @Test
  void noBodyMessagesWhenHeadersEndTheStream() throws Exception {
    FakeEnvoy envoy = passThroughEnvoy(withModes(BodySendMode.STREAMED, BodySendMode.BUFFERED).build());

    ExchangeResult r = envoy.execute(Exchange.builder().method("GET").path("/health").responseStatus(204).build());

    assertThat(cases(r.messagesSent())).containsExactly(REQUEST_HEADERS, RESPONSE_HEADERS);
    assertThat(r.clientResponse().status()).isEqualTo(204);
  }

  /** A pass-through exchange whose response body is held back once its headers went out. */
  private record BodyHeldBack(FakeEnvoy envoy, ExchangeHandle h, ScriptedProcessor.Stream stream) {}

  private BodyHeldBack holdResponseBody(EnvoyProfile profile) throws Exception {
    ScriptedProcessor server = ScriptedProcessor.passThrough();
    FakeEnvoy envoy = envoy(server, baseline().build(), profile);
    ExchangeHandle h = envoy.start(Exchange.post("/v1/completions", "{}")
        .responseBody("body").gateResponseBody().build());
    h.awaitResponseHeadersForwarded();
    return new BodyHeldBack(envoy, h, server.stream(0));
  }

  @Test
  void defaultProfileClosesAtStreamEndWithHalfCloseThenCancel() throws Exception {
    BodyHeldBack held = holdResponseBody(EnvoyProfile.V1_36);
    FakeEnvoy envoy = held.envoy();
    ExchangeHandle h = held.h();
    ScriptedProcessor.Stream stream = held.stream();
    // Every reply so far handled: V1_37 would have closed the stream by now (see the next test).
    h.awaitRepliesHandled(h.messagesSentSoFar().size());
    assertThat(envoy.stats().streamsClosed()).isZero();
    assertThat(stream.cancelled).isNotDone();

    h.releaseResponseBody();
    ExchangeResult r = h.awaitResult();

    assertThat(r.streamEnd()).isEqualTo(ExchangeResult.StreamEnd.CLOSED_BY_ENVOY);
    assertThat(stream.halfClosed.get(2, TimeUnit.SECONDS)).isNull();
    assertThat(stream.cancelled.get(2, TimeUnit.SECONDS).getCode()).isEqualTo(Status.Code.CANCELLED);
  }

  @Test
  void v137ClosesRightAfterTheLastNeededReply() throws Exception {
    BodyHeldBack held = holdResponseBody(EnvoyProfile.V1_37);
    ExchangeHandle h = held.h();
    ScriptedProcessor.Stream stream = held.stream();

    // closed although the response body has not been delivered yet
    assertThat(stream.cancelled.get(2, TimeUnit.SECONDS).getCode()).isEqualTo(Status.Code.CANCELLED);
    assertThat(stream.halfClosed).isDone();
    h.releaseResponseBody();
    ExchangeResult r = h.awaitResult();
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("body");
    assertThat(r.stats().streamsClosed()).isEqualTo(1);
  }

  @Test
  void initialMetadataAndAuthorityComeFromGrpcServiceAndPerRouteOverride() throws Exception {
    ScriptedProcessor server = ScriptedProcessor.passThrough();
    ExternalProcessor config = baseline()
        .setGrpcService(GrpcService.newBuilder()
            .setEnvoyGrpc(GrpcService.EnvoyGrpc.newBuilder().setClusterName("ext-proc-cluster"))
            .addInitialMetadata(HeaderValue.newBuilder().setKey("x-pool").setValue("default"))
            .addInitialMetadata(HeaderValue.newBuilder().setKey("x-team").setValue("infra")))
        .build();
    FakeEnvoy envoy = envoy(server, config, EnvoyProfile.V1_36);

    envoy.execute(Exchange.post("/v1/completions", "{}").grpcInitialMetadata("x-pool", "context").build());

    ScriptedProcessor.Stream stream = server.stream(0);
    assertThat(stream.authority()).isEqualTo("ext-proc-cluster");
    assertThat(stream.initialMetadata("x-pool")).isEqualTo("context");
    assertThat(stream.initialMetadata("x-team")).isEqualTo("infra");
  }

  @Test
  void unsupportedConfigurationsAreRejected() throws Exception {
    ScriptedProcessor server = ScriptedProcessor.passThrough();
    FakeEnvoy.Builder b = envoyFor(server);
    assertThatThrownBy(() -> b.config(baseline().setObservabilityMode(true).build()).build())
        .isInstanceOf(UnsupportedOperationException.class).hasMessageContaining("observability_mode");
    assertThatThrownBy(() -> b.config(
            withModes(BodySendMode.NONE, BodySendMode.FULL_DUPLEX_STREAMED).build()).build())
        .isInstanceOf(UnsupportedOperationException.class).hasMessageContaining("FULL_DUPLEX");
    assertThatThrownBy(() -> b.config(
            baseline().setSendBodyWithoutWaitingForHeaderResponse(true).build()).build())
        .isInstanceOf(UnsupportedOperationException.class)
        .hasMessageContaining("send_body_without_waiting");
  }

  @Test
  void requestBodyMessagesUseTheRequestOneofAndKeepOrder() throws Exception {
    FakeEnvoy envoy = passThroughEnvoy(withModes(BodySendMode.STREAMED, BodySendMode.NONE).build());

    ExchangeResult r = envoy.execute(Exchange.post("/v1/completions", "0123456789")
        .requestChunking(Chunking.at(2, 7)).responseBody("r").build());

    assertThat(cases(r.messagesSent()))
        .containsExactly(REQUEST_HEADERS, REQUEST_BODY, REQUEST_BODY, REQUEST_BODY, RESPONSE_HEADERS);
    assertThat(bodies(r.messagesSent())).containsExactly("01", "23456", "789");
    assertThat(r.upstreamRequest().bodyUtf8()).isEqualTo("0123456789");
    // STREAMED strips content-length from the forwarded request, not from the message
    assertThat(r.upstreamRequest().headers().contains("content-length")).isFalse();
    assertThat(r.messagesSent().get(0).getRequestHeaders().getHeaders().getHeadersList())
        .extracting(HeaderValue::getKey).contains("content-length");
  }
}
