package io.disaggusage.extproc.emulator.envoy;

import io.disaggusage.extproc.driver.Chunking;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.bodyText;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.pass;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.replaceBody;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.REQUEST_HEADERS;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.RESPONSE_BODY;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.RESPONSE_HEADERS;
import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.util.Durations;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.HeaderSendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.Status;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** mode_override rules and their content-length consequences (items 16, 34). */
class FakeEnvoyModeOverrideTest extends FakeEnvoyTestSupport {

  private static final ProcessingMode STREAM_RESPONSE = ProcessingMode.newBuilder()
      .setResponseBodyMode(BodySendMode.STREAMED).build();

  /**
   * Sends {@code override} in the response-headers reply (optionally removing content-length) and
   * rewrites STREAMED response chunks to upper case plus a marker.
   */
  private static ScriptedProcessor streamingViaOverride(ProcessingMode override, boolean removeContentLength) {
    return new ScriptedProcessor((req, s) -> {
      if (req.hasResponseHeaders()) {
        s.reply(ExtProcReplies.switchMode(req, override, removeContentLength));
      } else if (req.hasResponseBody()) {
        String t = bodyText(req);
        s.reply(replaceBody(req, t.isEmpty() ? "" : t.toUpperCase(Locale.ROOT) + "!"));
      } else {
        s.reply(pass(req));
      }
    });
  }

  private static ExternalProcessor.Builder overridable() {
    return baseline().setAllowModeOverride(true);
  }

  @Test
  void overrideToStreamedKeepsContentLengthSoALengthChangeIsAMismatch() throws Exception {
    FakeEnvoy envoy = envoy(streamingViaOverride(STREAM_RESPONSE, false), overridable().build(), EnvoyProfile.V1_37);

    ExchangeResult r = envoy.execute(Exchange.post("/v1/completions", "{}")
        .responseBody("hello").responseContentLength().build());

    assertThat(cases(r.messagesSent())).containsExactly(REQUEST_HEADERS, RESPONSE_HEADERS, RESPONSE_BODY);
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("HELLO!");
    assertThat(r.clientResponse().header("content-length")).contains("5");
    assertThat(r.contentLengthMismatch()).isTrue();
  }

  @Test
  void serverRemovingContentLengthAvoidsTheMismatch() throws Exception {
    FakeEnvoy envoy = envoy(streamingViaOverride(STREAM_RESPONSE, true), overridable().build(), EnvoyProfile.V1_37);

    ExchangeResult r = envoy.execute(Exchange.post("/v1/completions", "{}")
        .responseBody("hello").responseContentLength().build());

    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("HELLO!");
    assertThat(r.clientResponse().header("content-length")).isEmpty();
    assertThat(r.contentLengthMismatch()).isFalse();
  }

  @Test
  void strippingOnOverrideIsSwitchable() throws Exception {
    ScriptedProcessor server = streamingViaOverride(STREAM_RESPONSE, false);
    FakeEnvoy envoy = envoyFor(server).config(overridable().build())
        .profile(EnvoyProfile.V1_37).stripContentLengthOnModeOverride(true).build();
    try (envoy) {
      ExchangeResult r = envoy.execute(Exchange.post("/v1/completions", "{}")
          .responseBody("hello").responseContentLength().build());
      assertThat(r.clientResponse().header("content-length")).isEmpty();
      assertThat(r.contentLengthMismatch()).isFalse();
    }
  }

  @Test
  void overrideIgnoredWithoutAllowModeOverride() throws Exception {
    FakeEnvoy envoy = envoy(streamingViaOverride(STREAM_RESPONSE, false), baseline().build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/x", "{}").responseBody("hello").build());

    assertThat(cases(r.messagesSent())).containsExactly(REQUEST_HEADERS, RESPONSE_HEADERS);
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("hello");
  }

  @Test
  void aClientThatKnowsTheLengthHasTheResponseBeforeEnvoyEndsTheStream() throws Exception {
    // Streams the response by override (content-length stays); answers the end of the body 300 ms late.
    ScriptedProcessor slowEnd = new ScriptedProcessor((req, s) -> {
      if (req.hasResponseHeaders()) {
        s.reply(pass(req).toBuilder().setModeOverride(STREAM_RESPONSE).build());
      } else if (req.hasResponseBody() && req.getResponseBody().getEndOfStream()) {
        s.replyLater(pass(req), 300);
      } else {
        s.reply(pass(req));
      }
    });
    FakeEnvoy envoy = envoy(slowEnd, overridable().setMessageTimeout(Durations.fromMillis(2000)).build(), EnvoyProfile.V1_37);
    // As an HTTP/1 upstream's codec delivers a body: its bytes, then its end as a message of its own.
    Exchange.Builder exchange = Exchange.post("/x", "{}").responseBody("{\"a\":1}").responseContentLength()
        .responseChunking(Chunking.whole().withEmptyFinalChunk()).gateResponseBody();

    ExchangeHandle h = envoy.start(exchange.build());
    h.awaitResponseHeadersForwarded();
    h.releaseResponseBody();
    h.awaitResponseRead();
    assertThat(h.result()).isNotDone();
    assertThat(h.clientBodySoFar()).asString().isEqualTo("{\"a\":1}");
    assertThat(h.awaitResult().clientResponse().complete()).isTrue();

    // A client that closes its connection then resets the stream: the reply to the end is never read.
    ExchangeHandle closing = envoy.start(exchange.clientClosesAfterResponse().build());
    closing.awaitResponseHeadersForwarded();
    closing.releaseResponseBody();
    ExchangeResult r = closing.awaitResult();
    assertThat(r.clientResponse().reset()).isTrue();
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("{\"a\":1}");
    // Only the data's reply was read; whether the end went out before the reset is a race, as in Envoy.
    assertThat(r.messagesReceived().stream().filter(ProcessingResponse::hasResponseBody)).hasSize(1);
  }

  @Test
  void overrideOnABodyReplyIsIgnored() throws Exception {
    // Request body STREAMED by config; the server tries to turn on response streaming in a body reply.
    ScriptedProcessor server = new ScriptedProcessor((req, s) -> s.reply(req.hasRequestBody()
        ? pass(req).toBuilder().setModeOverride(STREAM_RESPONSE).build()
        : pass(req)));
    FakeEnvoy envoy = envoy(server,
        overridable().setProcessingMode(withModes(BodySendMode.STREAMED, BodySendMode.NONE).getProcessingMode()).build(),
        EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/x", "{}").responseBody("hello").build());

    assertThat(r.messagesSent().stream().noneMatch(ProcessingRequest::hasResponseBody)).isTrue();
  }

  @Test
  void bodyModesAlwaysComeFromTheOverrideAndDefaultHeaderModesKeepTheConfig() throws Exception {
    // Config: request body STREAMED, response headers SKIP. The override in the request-headers reply
    // names only the response body: request body becomes NONE, response headers stay SKIP.
    ScriptedProcessor server = new ScriptedProcessor((req, s) -> s.reply(req.hasRequestHeaders()
        ? pass(req).toBuilder().setModeOverride(STREAM_RESPONSE).build()
        : pass(req)));
    ExternalProcessor.Builder config = overridable();
    config.getProcessingModeBuilder()
        .setRequestBodyMode(BodySendMode.STREAMED).setResponseHeaderMode(HeaderSendMode.SKIP);
    FakeEnvoy envoy = envoy(server, config.build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/x", "request-body")
        .requestChunking(Chunking.fixed(4)).responseBody("resp").build());

    assertThat(cases(r.messagesSent())).containsExactly(REQUEST_HEADERS, RESPONSE_BODY);
    assertThat(r.upstreamRequest().bodyUtf8()).isEqualTo("request-body");
  }

  @Test
  void allowedOverrideModesIgnoreRequestHeaderModeAndRejectOthers() throws Exception {
    ExternalProcessor.Builder config = overridable()
        .addAllowedOverrideModes(ProcessingMode.newBuilder()
            .setRequestHeaderMode(HeaderSendMode.SKIP) // ignored in the comparison
            .setResponseHeaderMode(HeaderSendMode.SEND)
            .setRequestTrailerMode(HeaderSendMode.SKIP)
            .setResponseTrailerMode(HeaderSendMode.SKIP)
            .setResponseBodyMode(BodySendMode.STREAMED));
    FakeEnvoy envoy = envoy(streamingViaOverride(STREAM_RESPONSE, true), config.build(), EnvoyProfile.V1_36);
    ExchangeResult allowed = envoy.execute(Exchange.post("/x", "{}").responseBody("abc").build());
    assertThat(allowed.clientResponse().bodyUtf8()).isEqualTo("ABC!");

    ProcessingMode buffered = ProcessingMode.newBuilder().setResponseBodyMode(BodySendMode.BUFFERED).build();
    FakeEnvoy envoy2 = envoy(streamingViaOverride(buffered, true), config.build(), EnvoyProfile.V1_36);
    ExchangeResult rejected = envoy2.execute(Exchange.post("/x", "{}").responseBody("abc").build());
    assertThat(rejected.messagesSent().stream().noneMatch(ProcessingRequest::hasResponseBody)).isTrue();
    assertThat(rejected.clientResponse().bodyUtf8()).isEqualTo("abc");
  }

  @Test
  void turningEverythingOffStopsMessagesAndV137ClosesAtOnce() throws Exception {
    ProcessingMode allOff = ProcessingMode.newBuilder()
        .setResponseHeaderMode(HeaderSendMode.SKIP)
        .setRequestTrailerMode(HeaderSendMode.SKIP)
        .setResponseTrailerMode(HeaderSendMode.SKIP)
        .build();
    ScriptedProcessor server = new ScriptedProcessor((req, s) ->
        s.reply(pass(req).toBuilder().setModeOverride(allOff).build()));
    FakeEnvoy envoy = envoy(server, overridable().build(), EnvoyProfile.V1_37);

    ExchangeHandle h = envoy.start(Exchange.post("/v1/models", "{}").gateResponseHeaders().build());
    h.awaitRequestHeadersForwarded();
    assertThat(server.stream(0).cancelled.get(2, TimeUnit.SECONDS).getCode()).isEqualTo(Status.Code.CANCELLED);
    h.releaseResponseBody();
    ExchangeResult r = h.awaitResult();

    assertThat(cases(r.messagesSent())).containsExactly(REQUEST_HEADERS);
    assertThat(r.clientResponse().status()).isEqualTo(200);
  }
}
