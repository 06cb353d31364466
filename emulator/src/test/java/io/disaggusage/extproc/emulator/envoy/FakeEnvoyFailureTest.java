package io.disaggusage.extproc.emulator.envoy;

import io.disaggusage.extproc.driver.Chunking;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.endOfStream;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.pass;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.replaceBody;
import static org.assertj.core.api.Assertions.assertThat;

import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.Status;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** gRPC errors, clean closes, spurious replies, downstream aborts (items 26–28, 30). */
class FakeEnvoyFailureTest extends FakeEnvoyTestSupport {

  private static ExternalProcessor.Builder streamedResponse() {
    return withModes(BodySendMode.NONE, BodySendMode.STREAMED);
  }

  @Test
  void grpcErrorInTheRequestPhaseIsA500FailClosed() throws Exception {
    ScriptedProcessor server = new ScriptedProcessor((req, s) ->
        s.fail(Status.INTERNAL.withDescription("boom now")));
    FakeEnvoy envoy = envoy(server, baseline().build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/x", "{}").build());

    assertThat(r.clientResponse().status()).isEqualTo(500);
    assertThat(r.clientResponse().responseCodeDetails()).isEqualTo("ext_proc_error_gRPC_error_13{boom_now}");
    assertThat(r.upstreamRequest().reached()).isFalse();
    assertThat(r.streamEnd()).isEqualTo(ExchangeResult.StreamEnd.SERVER_FAILED);
    assertThat(r.stats().streamsFailed()).isEqualTo(1);
  }

  /**
   * Passes everything but the response body; answers its first chunk with {@code firstReply} and leaves
   * the later chunks to {@code later}.
   */
  private static ScriptedProcessor firstResponseChunkThen(
      Function<ProcessingRequest, ProcessingResponse> firstReply, ScriptedProcessor.Script later) {
    return new ScriptedProcessor((req, s) -> {
      if (!req.hasResponseBody()) {
        s.reply(pass(req));
      } else if (!s.state.containsKey("first")) {
        s.state.put("first", true);
        s.reply(firstReply.apply(req));
      } else {
        later.onMessage(req, s);
      }
    });
  }

  @Test
  void grpcErrorFailOpenContinuesWithQueuedDataUnmodified() throws Exception {
    // Rewrites chunk 1, receives chunk 2 and 3 but fails the call when chunk 3 arrives.
    ScriptedProcessor server = firstResponseChunkThen(req -> replaceBody(req, "R1;"), (req, s) -> {
      if (endOfStream(req)) {
        s.fail(Status.UNAVAILABLE);
      }
    });
    FakeEnvoy envoy = envoy(server, streamedResponse().setFailureModeAllow(true).build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/x", "{}")
        .responseBody("c1;c2;c3;").responseChunking(Chunking.fixed(3)).build());

    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("R1;c2;c3;");
    assertThat(r.clientResponse().complete()).isTrue();
    assertThat(r.stats().failureModeAllowed()).isEqualTo(1);
    assertThat(r.stats().streamsFailed()).isEqualTo(1);
  }

  @Test
  void grpcErrorAfterHeadersWentOutResetsFailClosed() throws Exception {
    ScriptedProcessor server = new ScriptedProcessor((req, s) -> {
      if (req.hasResponseBody()) {
        s.fail(Status.INTERNAL);
      } else {
        s.reply(pass(req));
      }
    });
    FakeEnvoy envoy = envoy(server, streamedResponse().build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/x", "{}").responseBody("abc").build());

    assertThat(r.clientResponse().reset()).isTrue();
    assertThat(r.clientResponse().status()).isEqualTo(200);
  }

  @Test
  void cleanCloseMidBodyContinuesUnprocessedAndLosesNothingQueued() throws Exception {
    // Answers chunk 1 by holding it back (empty reply), then closes OK when chunk 2 arrives.
    ScriptedProcessor server = firstResponseChunkThen(ExtProcReplies::clearBody, (req, s) -> s.complete());
    FakeEnvoy envoy = envoy(server, streamedResponse().build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/x", "{}")
        .responseBody("c1;c2;c3;").responseChunking(Chunking.fixed(3))
        .responseChunkDelay(java.time.Duration.ofMillis(20)).build());

    // chunk 1 was answered empty: lost (the doc's warning); chunk 2 queued → injected; chunk 3 unprocessed
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("c2;c3;");
    assertThat(r.clientResponse().status()).isEqualTo(200);
    assertThat(r.streamEnd()).isEqualTo(ExchangeResult.StreamEnd.SERVER_CLOSED_OK);
    assertThat(r.messagesSent().stream().filter(ProcessingRequest::hasResponseBody)).hasSize(2);
    assertThat(r.stats().streamsClosed()).isEqualTo(1);
  }

  /** Answers the request headers with a body reply: wrong type for the state. */
  private static ScriptedProcessor spurious() {
    return new ScriptedProcessor((req, s) -> s.reply(req.hasRequestHeaders()
        ? replaceBody(ProcessingRequest.newBuilder()
            .setRequestBody(io.envoyproxy.envoy.service.ext_proc.v3.HttpBody.getDefaultInstance()).build(), "x")
        : pass(req)));
  }

  @Test
  void spuriousReplyFailClosedIsA500FromV135() throws Exception {
    FakeEnvoy envoy = envoy(spurious(), baseline().build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/x", "{}").build());

    assertThat(r.clientResponse().status()).isEqualTo(500);
    assertThat(r.clientResponse().responseCodeDetails()).isEqualTo("spurious_message");
    assertThat(r.stats().spuriousMsgsReceived()).isEqualTo(1);
  }

  @Test
  void spuriousReplyOnV134AlwaysContinuesUnprocessed() throws Exception {
    FakeEnvoy envoy = envoy(spurious(), baseline().build(), EnvoyProfile.V1_34);

    ExchangeResult r = envoy.execute(Exchange.post("/x", "{}").responseBody("ok").build());

    assertThat(r.clientResponse().status()).isEqualTo(200);
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("ok");
    assertThat(r.upstreamRequest().reached()).isTrue();
    assertThat(r.stats().spuriousMsgsReceived()).isEqualTo(1);
    assertThat(r.messagesSent()).hasSize(1); // the processor is ignored for the rest of the exchange
  }

  @ParameterizedTest
  @EnumSource(value = EnvoyProfile.class, names = {"V1_36", "V1_37"})
  void spuriousReplyFailOpenContinuesAndCounts(EnvoyProfile profile) throws Exception {
    FakeEnvoy envoy = envoy(spurious(), baseline().setFailureModeAllow(true).build(), profile);

    ExchangeResult r = envoy.execute(Exchange.post("/x", "{}").responseBody("ok").build());

    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("ok");
    assertThat(r.stats().failureModeAllowed()).isEqualTo(1);
  }

  /** As real Envoy 1.36 and 1.40 were measured to: the same sequence as on a message timeout. */
  @Test
  void downstreamResetHalfClosesThenCancelsTheStream() throws Exception {
    ScriptedProcessor server = ScriptedProcessor.passThrough();
    FakeEnvoy envoy = envoy(server, streamedResponse().build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/x", "{}")
        .responseBody("c1;c2;c3;").responseChunking(Chunking.fixed(3))
        .downstreamResetAfterResponseChunks(1).build());

    assertThat(r.clientResponse().reset()).isTrue();
    assertThat(r.streamEnd()).isEqualTo(ExchangeResult.StreamEnd.RESET_BY_DOWNSTREAM);
    ScriptedProcessor.Stream stream = server.stream(0);
    assertThat(stream.cancelled.get(2, TimeUnit.SECONDS).getCode()).isEqualTo(Status.Code.CANCELLED);
    assertThat(stream.ends).containsExactly("half-close", "cancel");
  }

  @Test
  void downstreamResetFromTheHandle() throws Exception {
    FakeEnvoy envoy = passThroughEnvoy(streamedResponse().build());

    ExchangeHandle h = envoy.start(Exchange.post("/x", "{}")
        .responseBody("c1;c2;").responseChunking(Chunking.fixed(3)).gateResponseBody().build());
    h.releaseResponseChunk();
    h.awaitClientBodyContaining("c1;");
    ExchangeResult r = h.resetDownstream().awaitResult();

    assertThat(r.clientResponse().reset()).isTrue();
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("c1;");
  }
}
