package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.OpenAiClientView;
import io.disaggusage.extproc.testkit.Wire;
import static io.disaggusage.extproc.testkit.EngineRequests.PATH;
import static io.disaggusage.extproc.testkit.EngineRequests.TRT_ID;
import static io.disaggusage.extproc.scenario.Flows.ctxExchange;
import static io.disaggusage.extproc.testkit.EngineRequests.trtRequest;
import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.testkit.OpenAiClientView.ClientUsage;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.EnvoyStats;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Generation-first flows whose context usage arrives after Envoy's message timeout (issue 14 B): the
 * generation's last reply waits, and Envoy must not give up on it. Envoy's timer belongs to the latest
 * message it sent and stops at any reply; an {@code override_message_timeout} counts only while it
 * runs. The service extends it when the timer runs for the message it holds, and sends nothing Envoy
 * would ignore when the end of the body came with its last bytes.
 */
@ExchangeSpecification
class GenerationFirstTimerScenarioTest {
  /** Longer than the fake Envoy's message timeout in these tests. */
  private static final Duration CONTEXT_LAG =
      Duration.ofMillis(ServiceUnderTest.TEST_MESSAGE_TIMEOUT_MILLIS + 300);
  private static final String CTX_USAGE = Wire.usage(128, 1, 9L);
  private static final String GEN_USAGE = Wire.usage(128, 5, 128L);

  private ServiceUnderTest service;

  @BeforeEach
  void start() throws Exception {
    service = new ServiceUnderTest(ServiceUnderTest.testConfig(Duration.ofMillis(2500)));
  }

  @AfterEach
  void stop() throws Exception {
    service.close();
  }

  private static Exchange.Builder gen(String contentType, String body) {
    return Exchange.post(PATH, trtRequest("generation_only", ",\"ctx_request_id\":" + TRT_ID + ",\"schedule_style\":1"))
        .responseHeader("content-type", contentType)
        .responseBody(body);
  }

  private ExchangeResult generationFirst(Exchange.Builder gen) throws Exception {
    Exchange.Builder ctx = ctxExchange(
        trtRequest("context_only", ",\"disagg_request_id\":" + TRT_ID + ",\"schedule_style\":1"),
        Wire.trtContextResponse(TRT_ID, TRT_ID, CTX_USAGE));
    ExchangeResult[] r = Flows.generationFirst(service.envoy, ctx, service.envoy, gen, CONTEXT_LAG);
    assertClean(r[0]);
    assertClean(r[1]); // no message timeout: the client got every byte, corrected
    assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("rewritten");
    assertThat(r[1].stats().get(EnvoyStats.OVERRIDE_MESSAGE_TIMEOUT_IGNORED)).isZero();
    // The held reply went out after the plain message timeout, but not after Envoy's timer: no give-up.
    service.awaitStreamsEnded();
    assertThat(service.metrics.exchangeCount(Phase.GENERATION, Outcome.REWRITTEN)).isEqualTo(1);
    return r[1];
  }

  @Test
  void aJsonBodyWhoseEndCameWithItsLastBytesNeedsNoExtension() throws Exception {
    // Content-length: Envoy's codec reads the end with the last bytes and sends both messages back to
    // back; the reply to the data stops Envoy's timer, so there is nothing to extend.
    ExchangeResult r = generationFirst(
        gen("application/json", Wire.chatCompletion("g", GEN_USAGE))
            .responseContentLength()
            .responseChunking(Chunking.whole().withEmptyFinalChunk()));
    assertThat(OpenAiClientView.chatCompletion(r.clientResponse().bodyUtf8()))
        .isEqualTo(new ClientUsage(128, 9L, 5, 133));
    assertThat(r.stats().get(EnvoyStats.OVERRIDE_MESSAGE_TIMEOUT_RECEIVED)).isZero();
  }

  @Test
  void aJsonBodyEndingInItsLastDataMessageGetsTheExtension() throws Exception {
    ExchangeResult r = generationFirst(
        gen("application/json", Wire.chatCompletion("g", GEN_USAGE)).responseContentLength());
    assertThat(OpenAiClientView.chatCompletion(r.clientResponse().bodyUtf8()))
        .isEqualTo(new ClientUsage(128, 9L, 5, 133));
    assertThat(r.stats().get(EnvoyStats.OVERRIDE_MESSAGE_TIMEOUT_RECEIVED)).isEqualTo(1);
  }

  @Test
  void aStreamWhoseEndComesInAReadOfItsOwnGetsTheExtension() throws Exception {
    // Chunked: the end of the stream comes a moment after its last event, once Envoy has had the
    // reply to that event, so Envoy's timer runs for the end.
    ExchangeResult r = generationFirst(
        gen("text/event-stream", Wire.chatStream(GEN_USAGE, "Par", "is"))
            .responseChunking(Chunking.sseEvents().withEmptyFinalChunk())
            .responseChunkDelay(Duration.ofMillis(20)));
    assertThat(OpenAiClientView.chatStream(r.clientResponse().bodyUtf8()))
        .isEqualTo(new ClientUsage(128, 9L, 5, 133));
    assertThat(r.stats().get(EnvoyStats.OVERRIDE_MESSAGE_TIMEOUT_RECEIVED)).isEqualTo(1);
  }
}
