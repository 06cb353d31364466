package io.disaggusage.extproc.emulator.envoy;

import io.disaggusage.extproc.driver.Chunking;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.pass;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.replaceBody;
import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.util.Durations;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import org.junit.jupiter.api.Test;

/** message_timeout and override_message_timeout (items 17, 25). */
class FakeEnvoyTimeoutTest extends FakeEnvoyTestSupport {

  private static ExternalProcessor.Builder timeouts(long messageMillis, long maxMillis) {
    return withModes(BodySendMode.NONE, BodySendMode.STREAMED)
        .setMessageTimeout(Durations.fromMillis(messageMillis))
        .setMaxMessageTimeout(Durations.fromMillis(maxMillis));
  }

  /** Never answers response headers. */
  private static ScriptedProcessor silentOnResponse() {
    return new ScriptedProcessor((req, s) -> {
      if (!req.hasResponseHeaders()) {
        s.reply(pass(req));
      }
    });
  }

  @Test
  void failClosedTimeoutIsA504LocalReply() throws Exception {
    FakeEnvoy envoy = envoy(silentOnResponse(), timeouts(100, 0).build(), EnvoyProfile.V1_36);

    long start = System.nanoTime();
    ExchangeResult r = envoy.execute(Exchange.post("/x", "{}").responseBody("secret").build());
    long elapsedMs = (System.nanoTime() - start) / 1_000_000;

    assertThat(r.clientResponse().status()).isEqualTo(504);
    assertThat(r.clientResponse().responseCodeDetails()).isEqualTo("ext_proc_error_per-message_timeout_exceeded");
    assertThat(r.clientResponse().bodyUtf8()).doesNotContain("secret");
    assertThat(r.stats().messageTimeouts()).isEqualTo(1);
    assertThat(elapsedMs).isBetween(90L, 2000L);
  }

  @Test
  void failOpenTimeoutContinuesUnprocessed() throws Exception {
    ScriptedProcessor server = silentOnResponse();
    FakeEnvoy envoy = envoy(server, timeouts(100, 0).setFailureModeAllow(true).build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/x", "{}").responseBody("original").build());

    assertThat(r.clientResponse().status()).isEqualTo(200);
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("original");
    assertThat(r.stats().messageTimeouts()).isEqualTo(1);
    assertThat(r.stats().failureModeAllowed()).isEqualTo(1);
    assertThat(r.messagesSent().stream().noneMatch(m -> m.hasResponseBody())).isTrue();
    // The end looks as a client's hang-up does (FakeEnvoyFailureTest): a half-close, then a reset.
    ScriptedProcessor.Stream stream = server.stream(0);
    stream.cancelled.get(2, java.util.concurrent.TimeUnit.SECONDS);
    assertThat(stream.ends).containsExactly("half-close", "cancel");
  }

  /** Answers the first response chunk (rewritten), then goes silent. */
  private static ScriptedProcessor stallsAfterFirstChunk() {
    return new ScriptedProcessor((req, s) -> {
      if (!req.hasResponseBody()) {
        s.reply(pass(req));
      } else if (!s.state.containsKey("answered")) {
        s.state.put("answered", true);
        s.reply(replaceBody(req, "REWRITTEN-1;"));
      }
    });
  }

  @Test
  void failOpenTimeoutInjectsQueuedChunksUnmodified() throws Exception {
    FakeEnvoy envoy = envoy(stallsAfterFirstChunk(),
        timeouts(100, 0).setFailureModeAllow(true).build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/x", "{}")
        .responseBody("chunk1;chunk2;chunk3;").responseChunking(Chunking.fixed(7)).build());

    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("REWRITTEN-1;chunk2;chunk3;");
    assertThat(r.clientResponse().complete()).isTrue();
  }

  @Test
  void failClosedTimeoutAfterHeadersWentOutResetsTheClient() throws Exception {
    FakeEnvoy envoy = envoy(stallsAfterFirstChunk(), timeouts(100, 0).build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/x", "{}")
        .responseBody("chunk1;chunk2;").responseChunking(Chunking.fixed(7)).build());

    assertThat(r.clientResponse().reset()).isTrue();
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("REWRITTEN-1;");
    assertThat(r.clientResponse().localReply().orElseThrow().status()).isEqualTo(504);
  }

  /** Extends the timer with override_message_timeout, then answers after {@code answerAfterMs}. */
  private static ScriptedProcessor extendsThenAnswers(long overrideMs, long answerAfterMs, int overrides) {
    return new ScriptedProcessor((req, s) -> {
      if (!req.hasResponseHeaders()) {
        s.reply(pass(req));
        return;
      }
      for (int i = 0; i < overrides; i++) {
        s.reply(ProcessingResponse.newBuilder()
            .setOverrideMessageTimeout(Durations.fromMillis(overrideMs))
            // everything else in this reply is ignored
            .setResponseHeaders(pass(req).getResponseHeaders())
            .build());
      }
      s.replyLater(pass(req), answerAfterMs);
    });
  }

  /** One exchange whose processor sends {@code overrides} overrides of {@code overrideMs}, then answers 250 ms on. */
  private ExchangeResult overriding(long overrideMs, int overrides, ExternalProcessor config) throws Exception {
    return envoy(extendsThenAnswers(overrideMs, 250, overrides), config, EnvoyProfile.V1_36)
        .execute(Exchange.post("/x", "{}").build());
  }

  @Test
  void acceptedOverrideExtendsTheTimerAndCountsAsNothingElse() throws Exception {
    ExchangeResult r = overriding(600, 1, timeouts(100, 1000).build());

    assertThat(r.clientResponse().status()).isEqualTo(200);
    assertThat(r.stats().overrideMessageTimeoutReceived()).isEqualTo(1);
    assertThat(r.stats().messageTimeouts()).isZero();
    assertThat(r.stats().streamMsgsReceived()).isEqualTo(2); // the override is not a reply
  }

  @Test
  void overrideAboveMaxIsIgnoredAndTheRequestTimesOut() throws Exception {
    ExchangeResult r = overriding(2000, 1, timeouts(100, 1000).build());

    assertThat(r.clientResponse().status()).isEqualTo(504);
    assertThat(r.stats().overrideMessageTimeoutIgnored()).isEqualTo(1);
  }

  @Test
  void overrideIsDisabledWhenMaxMessageTimeoutIsUnset() throws Exception {
    ExchangeResult r = overriding(500, 1, timeouts(100, 0).setFailureModeAllow(true).build());

    assertThat(r.stats().overrideMessageTimeoutIgnored()).isEqualTo(1);
    assertThat(r.stats().messageTimeouts()).isEqualTo(1);
    assertThat(r.clientResponse().status()).isEqualTo(200); // fail-open
  }

  @Test
  void onlyOneOverridePerPendingMessage() throws Exception {
    ExchangeResult r = overriding(400, 2, timeouts(100, 1000).build());

    assertThat(r.stats().overrideMessageTimeoutReceived()).isEqualTo(1);
    assertThat(r.stats().overrideMessageTimeoutIgnored()).isEqualTo(1);
    assertThat(r.clientResponse().status()).isEqualTo(200);
  }

  @Test
  void timerRestartsOnEverySendSoSlowUpstreamGapsAreFine() throws Exception {
    FakeEnvoy envoy = envoy(ScriptedProcessor.passThrough(), timeouts(100, 0).build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/x", "{}")
        .responseBody("aabbcc").responseChunking(Chunking.fixed(2))
        .responseChunkDelay(java.time.Duration.ofMillis(150)).build());

    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("aabbcc");
    assertThat(r.stats().messageTimeouts()).isZero();
  }
}
