package io.disaggusage.extproc.emulator.envoy;

import io.disaggusage.extproc.driver.Chunking;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.bodyText;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.endOfStream;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.pass;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.replaceBody;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.set;
import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import com.google.protobuf.util.Durations;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.BodyMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.CommonResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.StreamedBodyResponse;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/** BUFFERED, BUFFERED_PARTIAL and STREAMED body handling (items 18–21, 24, 34). */
class FakeEnvoyBodyModesTest extends FakeEnvoyTestSupport {

  private static final String SSE =
      "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"
          + "data: {\"usage\":{\"prompt_tokens\":5,\"cached_tokens\":4}}\n\n"
          + "data: [DONE]\n\n";

  /** Rewrites every STREAMED response chunk to upper case plus a marker (a different length). */
  private static ScriptedProcessor upperCaser() {
    return new ScriptedProcessor((req, s) -> {
      if (req.hasResponseBody()) {
        String t = bodyText(req);
        s.reply(ExtProcReplies.reply(req, CommonResponse.newBuilder()
                .setBodyMutation(BodyMutation.newBuilder().setBody(
                    ByteString.copyFromUtf8(t.isEmpty() ? "" : t.toUpperCase(Locale.ROOT) + "|")))
                // header mutations in STREAMED body replies have no effect
                .setHeaderMutation(HeaderMutation.newBuilder().addSetHeaders(set("x-late", "1")))
                .build())
            .build());
      } else {
        s.reply(pass(req));
      }
    });
  }

  @Test
  void streamedChunksAreRewrittenOneReplyPerChunkWithAnyLength() throws Exception {
    ScriptedProcessor server = upperCaser();
    FakeEnvoy envoy = envoy(server,
        withModes(BodySendMode.NONE, BodySendMode.STREAMED).build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/v1/chat/completions", "{}")
        .responseHeader("content-type", "text/event-stream")
        .responseBody("abcdefgh").responseContentLength()
        .responseChunking(Chunking.fixed(3))
        .build());

    assertThat(bodies(r.messagesSent())).containsExactly("abc", "def", "gh");
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("ABC|DEF|GH|");
    assertThat(r.clientResponse().chunks()).hasSize(3);
    // content-length seen by the server, stripped from what the client gets
    ProcessingRequest respHeaders =
        r.messagesSent().stream().filter(ProcessingRequest::hasResponseHeaders).findFirst().orElseThrow();
    assertThat(respHeaders.getResponseHeaders().getHeaders().getHeadersList())
        .anyMatch(h -> h.getKey().equals("content-length"));
    assertThat(r.clientResponse().header("content-length")).isEmpty();
    assertThat(r.clientResponse().chunkedFraming()).isTrue();
    assertThat(r.clientResponse().header("x-late")).isEmpty();
    assertThat(r.contentLengthMismatch()).isFalse();
  }

  @Test
  void heldBackBytesAreFlushedInTheReplyToTheEmptyEndOfStreamChunk() throws Exception {
    // Holds everything back (empty replies) and flushes it all at end_of_stream.
    ScriptedProcessor server = new ScriptedProcessor((req, s) -> {
      if (!req.hasResponseBody()) {
        s.reply(pass(req));
        return;
      }
      StringBuilder held = (StringBuilder) s.state.computeIfAbsent("held", k -> new StringBuilder());
      held.append(bodyText(req));
      if (endOfStream(req)) {
        s.reply(replaceBody(req, held.toString()));
      } else {
        s.reply(ExtProcReplies.clearBody(req));
      }
    });
    FakeEnvoy envoy = envoy(server,
        withModes(BodySendMode.NONE, BodySendMode.STREAMED).build(), EnvoyProfile.V1_37);

    ExchangeResult r = envoy.execute(Exchange.post("/v1/chat/completions", "{}")
        .responseBody(SSE).responseChunking(Chunking.random(7, 13).withEmptyFinalChunk()).build());

    assertThat(r.clientResponse().bodyUtf8()).isEqualTo(SSE);
    assertThat(r.clientResponse().chunks()).hasSize(1);
    assertThat(r.clientResponse().complete()).isTrue();
    ProcessingRequest last = r.messagesSent().get(r.messagesSent().size() - 1);
    assertThat(last.getResponseBody().getBody().isEmpty()).isTrue();
    assertThat(last.getResponseBody().getEndOfStream()).isTrue();
  }

  @Test
  void endOfStreamChunkEndsTheBodyEvenWhenEmptied() throws Exception {
    ScriptedProcessor server = new ScriptedProcessor((req, s) ->
        s.reply(req.hasResponseBody() ? ExtProcReplies.clearBody(req) : pass(req)));
    FakeEnvoy envoy = envoy(server,
        withModes(BodySendMode.NONE, BodySendMode.STREAMED).build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/x", "{}").responseBody("abc").build());

    assertThat(r.clientResponse().complete()).isTrue();
    assertThat(r.clientResponse().body()).isEmpty();
  }

  @Test
  void streamedChunksArePipelinedWithoutWaitingForReplies() throws Exception {
    // Answers nothing until three body chunks are outstanding, then answers them in order.
    List<ProcessingRequest> pending = new ArrayList<>();
    ScriptedProcessor server = new ScriptedProcessor((req, s) -> {
      if (!req.hasResponseBody()) {
        s.reply(pass(req));
        return;
      }
      synchronized (pending) {
        pending.add(req);
        if (pending.size() == 3) {
          pending.forEach(p -> s.reply(replaceBody(p, "[" + bodyText(p) + "]")));
        }
      }
    });
    FakeEnvoy envoy = envoy(server,
        withModes(BodySendMode.NONE, BodySendMode.STREAMED).build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/x", "{}")
        .responseBody("aabbcc").responseChunking(Chunking.fixed(2)).build());

    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("[aa][bb][cc]");
    assertThat(r.clientResponse().status()).isEqualTo(200);
  }

  /** Answers the response headers once {@code answerHeaders} completes, every other message by {@code others}. */
  private static ScriptedProcessor answeringHeadersOn(
      CompletableFuture<Void> answerHeaders, ScriptedProcessor.Script others) {
    return new ScriptedProcessor((req, s) -> {
      if (req.hasResponseHeaders()) {
        answerHeaders.thenRun(() -> s.reply(pass(req)));
      } else {
        others.onMessage(req, s);
      }
    });
  }

  /**
   * Response body STREAMED, with a message timeout long enough that the tests can hold the headers
   * reply back while chunks arrive.
   */
  private FakeEnvoy slowHeadersReplyEnvoy(ScriptedProcessor server) throws Exception {
    return envoy(server,
        withModes(BodySendMode.NONE, BodySendMode.STREAMED).setMessageTimeout(Durations.fromSeconds(5)).build(),
        EnvoyProfile.V1_36);
  }

  @Test
  void chunksArrivingBeforeTheHeadersReplyAreCoalesced() throws Exception {
    CompletableFuture<Void> answerHeaders = new CompletableFuture<>();
    ScriptedProcessor server = answeringHeadersOn(answerHeaders, (req, s) -> s.reply(pass(req)));
    FakeEnvoy envoy = slowHeadersReplyEnvoy(server);

    ExchangeHandle h = envoy.start(Exchange.post("/x", "{}")
        .responseBody("aabbccdd").responseChunking(Chunking.fixed(2)).gateResponseBody().build());
    h.releaseResponseChunks(2);
    server.stream(0);
    h.awaitResponseChunksDelivered(2); // both chunks reach the filter while the headers reply is pending
    answerHeaders.complete(null);
    h.awaitResponseHeadersForwarded();
    h.releaseResponseBody();
    ExchangeResult r = h.awaitResult();

    assertThat(bodies(r.messagesSent())).containsExactly("aabb", "cc", "dd");
    assertThat(r.messagesSent().stream().filter(ProcessingRequest::hasResponseBody)
        .map(ExtProcReplies::endOfStream)).containsExactly(false, false, true);
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("aabbccdd");
  }

  @Test
  void wholeBodyBeforeHeadersReplyIsSentOnceAndHoldsTheHeaders() throws Exception {
    CompletableFuture<Void> answerHeaders = new CompletableFuture<>();
    ScriptedProcessor server = answeringHeadersOn(answerHeaders, (req, s) -> {
      if (req.hasResponseBody()) {
        s.reply(ExtProcReplies.reply(req, CommonResponse.newBuilder()
            .setHeaderMutation(HeaderMutation.newBuilder().addSetHeaders(set("x-from-body-reply", "1")))
            .setBodyMutation(BodyMutation.newBuilder().setBody(ByteString.copyFromUtf8("REWRITTEN")))
            .build()).build());
      } else {
        s.reply(pass(req));
      }
    });
    FakeEnvoy envoy = slowHeadersReplyEnvoy(server);

    ExchangeHandle h = envoy.start(Exchange.post("/x", "{}")
        .responseBody("aabbcc").responseChunking(Chunking.fixed(2)).build());
    server.stream(0);
    h.awaitResponseChunksDelivered(3); // the whole body reaches the filter while the headers reply is pending
    answerHeaders.complete(null);
    ExchangeResult r = h.awaitResult();

    assertThat(bodies(r.messagesSent())).containsExactly("aabbcc");
    assertThat(r.messagesSent().get(r.messagesSent().size() - 1).getResponseBody().getEndOfStream()).isTrue();
    assertThat(r.clientResponse().header("x-from-body-reply")).contains("1");
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("REWRITTEN");
  }

  @Test
  void streamedResponseMutationInStreamedModeIsSpurious() throws Exception {
    ScriptedProcessor server = new ScriptedProcessor((req, s) -> s.reply(req.hasResponseBody()
        ? ExtProcReplies.reply(req, CommonResponse.newBuilder().setBodyMutation(BodyMutation.newBuilder()
            .setStreamedResponse(StreamedBodyResponse.newBuilder().setBody(ByteString.copyFromUtf8("x")))).build()).build()
        : pass(req)));
    FakeEnvoy envoy = envoy(server,
        withModes(BodySendMode.NONE, BodySendMode.STREAMED).build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/x", "{}").responseBody("abc").build());

    assertThat(r.stats().spuriousMsgsReceived()).isEqualTo(1);
    assertThat(r.clientResponse().reset()).isTrue(); // fail-closed after headers went out
    assertThat(r.clientResponse().localReply().orElseThrow().details()).isEqualTo("spurious_message");
  }

  @Test
  void bufferedBodyHoldsHeadersAndAppliesTheBodyReplyHeaderMutation() throws Exception {
    ScriptedProcessor server = new ScriptedProcessor((req, s) -> {
      if (req.hasResponseBody()) {
        String rewritten = bodyText(req).replace("4", "0");
        s.reply(ExtProcReplies.reply(req, CommonResponse.newBuilder()
            .setHeaderMutation(HeaderMutation.newBuilder()
                .addSetHeaders(set("content-length", Integer.toString(rewritten.length()))))
            .setBodyMutation(BodyMutation.newBuilder().setBody(ByteString.copyFromUtf8(rewritten)))
            .build()).build());
      } else {
        s.reply(pass(req));
      }
    });
    FakeEnvoy envoy = envoy(server,
        withModes(BodySendMode.NONE, BodySendMode.BUFFERED).build(), EnvoyProfile.V1_36);

    String json = "{\"usage\":{\"cached_tokens\":4444}}";
    ExchangeHandle h = envoy.start(Exchange.post("/x", "{}")
        .responseBody(json).responseContentLength().responseChunking(Chunking.fixed(5))
        .gateResponseBody().build());
    h.releaseResponseChunks(2);
    h.awaitResponseChunksDelivered(2);
    h.awaitRepliesHandled(h.messagesSentSoFar().size()); // the response headers' reply included
    assertThat(h.responseHeadersForwarded()).isNotDone(); // held until the body reply
    h.releaseResponseBody();
    ExchangeResult r = h.awaitResult();

    assertThat(bodies(r.messagesSent())).containsExactly(json);
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("{\"usage\":{\"cached_tokens\":0000}}");
    assertThat(r.clientResponse().header("content-length")).contains(Integer.toString(json.length()));
    assertThat(r.contentLengthMismatch()).isFalse();
  }

  @Test
  void bufferedContentLengthMismatchIsA500() throws Exception {
    ScriptedProcessor server = new ScriptedProcessor((req, s) ->
        s.reply(req.hasResponseBody() ? replaceBody(req, "shorter") : pass(req)));
    FakeEnvoy envoy = envoy(server,
        withModes(BodySendMode.NONE, BodySendMode.BUFFERED).setFailureModeAllow(true).build(),
        EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/x", "{}")
        .responseBody("a much longer body").responseContentLength().build());

    assertThat(r.clientResponse().status()).isEqualTo(500);
    assertThat(r.clientResponse().responseCodeDetails())
        .isEqualTo("mismatch_between_content_length_and_the_length_of_the_mutated_body");
    assertThat(r.clientResponse().reset()).isFalse();
  }

  @Test
  void bufferedOverTheLimitIs413OnRequestAnd500OnResponse() throws Exception {
    ScriptedProcessor server = ScriptedProcessor.passThrough();
    FakeEnvoy envoy = envoyFor(server)
        .config(withModes(BodySendMode.BUFFERED, BodySendMode.BUFFERED).build())
        .profile(EnvoyProfile.V1_36).bufferLimitBytes(16).build();
    try (envoy) {
      ExchangeResult req = envoy.execute(Exchange.post("/x", "0123456789abcdefXYZ")
          .requestChunking(Chunking.fixed(4)).build());
      assertThat(req.clientResponse().status()).isEqualTo(413);
      assertThat(req.messagesSent().stream().noneMatch(ProcessingRequest::hasRequestBody)).isTrue();
      assertThat(req.upstreamRequest().complete()).isFalse();

      ExchangeResult resp = envoy.execute(Exchange.post("/x", "small")
          .responseBody("0123456789abcdefXYZ").responseChunking(Chunking.fixed(4)).build());
      assertThat(resp.clientResponse().status()).isEqualTo(500);
      assertThat(resp.clientResponse().responseCodeDetails()).isEqualTo("response_payload_too_large");
    }
  }

  @Test
  void bufferedPartialSendsAtTheLimitThenPassesTheRestThrough() throws Exception {
    ScriptedProcessor server = new ScriptedProcessor((req, s) ->
        s.reply(req.hasResponseBody() ? replaceBody(req, bodyText(req).toUpperCase(Locale.ROOT)) : pass(req)));
    FakeEnvoy envoy = envoyFor(server)
        .config(withModes(BodySendMode.NONE, BodySendMode.BUFFERED_PARTIAL).build())
        .profile(EnvoyProfile.V1_36).bufferLimitBytes(8).build();
    try (envoy) {
      ExchangeResult r = envoy.execute(Exchange.post("/x", "{}")
          .responseBody("abcdefghijklmnopqrst").responseContentLength().responseChunking(Chunking.fixed(4)).build());

      List<ProcessingRequest> bodyMsgs =
          r.messagesSent().stream().filter(ProcessingRequest::hasResponseBody).toList();
      assertThat(bodyMsgs).hasSize(1);
      assertThat(bodyText(bodyMsgs.get(0))).isEqualTo("abcdefgh");
      assertThat(bodyMsgs.get(0).getResponseBody().getEndOfStream()).isFalse();
      assertThat(r.clientResponse().bodyUtf8()).startsWith("ABCDEFGH").endsWith("qrst");
      assertThat(r.clientResponse().bodyUtf8().getBytes(StandardCharsets.UTF_8)).hasSize(20);
      assertThat(r.clientResponse().header("content-length")).isEmpty();
    }
  }

  @Test
  void duplicateFinalEndOfStreamMessageFault() throws Exception {
    // A robust server ignores body messages after end_of_stream.
    ScriptedProcessor robust = new ScriptedProcessor((req, s) -> {
      if (req.hasResponseBody() && s.state.containsKey("eos")) {
        return;
      }
      if (req.hasResponseBody() && endOfStream(req)) {
        s.state.put("eos", true);
      }
      s.reply(pass(req));
    });
    FakeEnvoy envoy = envoy(robust,
        withModes(BodySendMode.NONE, BodySendMode.STREAMED).build(), EnvoyProfile.V1_36);
    ExchangeResult ok = envoy.execute(Exchange.post("/x", "{}")
        .responseBody("abcd").responseChunking(Chunking.fixed(2)).duplicateFinalBodyMessage().build());
    assertThat(robust.stream(0).received().stream()
        .filter(m -> m.hasResponseBody() && m.getResponseBody().getEndOfStream())).hasSize(2);
    assertThat(ok.clientResponse().bodyUtf8()).isEqualTo("abcd");
    assertThat(ok.stats().spuriousMsgsReceived()).isZero();

    // A naive server answers the duplicate too. On the request path the exchange is still running
    // when that extra reply arrives: it is spurious, and fail-open continues unprocessed.
    ScriptedProcessor naive = new ScriptedProcessor((req, s) -> s.reply(pass(req)));
    FakeEnvoy envoy2 = envoy(naive,
        withModes(BodySendMode.STREAMED, BodySendMode.NONE).setFailureModeAllow(true).build(), EnvoyProfile.V1_36);
    ExchangeResult r = envoy2.execute(Exchange.post("/x", "abcd")
        .requestChunking(Chunking.fixed(2)).responseBody("resp").duplicateFinalBodyMessage().build());
    assertThat(r.stats().spuriousMsgsReceived()).isEqualTo(1);
    assertThat(r.stats().failureModeAllowed()).isEqualTo(1);
    assertThat(r.upstreamRequest().bodyUtf8()).isEqualTo("abcd");
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("resp");
    assertThat(r.clientResponse().status()).isEqualTo(200);
  }
}
