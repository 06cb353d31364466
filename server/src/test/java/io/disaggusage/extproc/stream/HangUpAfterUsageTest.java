package io.disaggusage.extproc.stream;

import static io.disaggusage.extproc.stream.FaultInjectionTest.assertNoLeak;
import static io.disaggusage.extproc.stream.FaultInjectionTest.config;
import static io.disaggusage.extproc.scenario.Flows.ctx;
import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.scenario.Flows;
import io.disaggusage.extproc.scenario.ServiceUnderTest;
import io.disaggusage.extproc.testkit.Wire;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.api.Test;

/**
 * A downstream that hangs up once it has what it wants. sglang-router closes its decode connection
 * right after reading {@code data: [DONE]}, before the chunked terminator; Envoy forwards the
 * terminator only after the service answered the end-of-stream message, so the router nearly always
 * closes first and Envoy resets the ext_proc stream. The accounting must not depend on that race:
 * the metadata goes out with the reply that releases the usage event, and the exchange is counted
 * with that event's outcome when the reset follows. A reset before the usage went out counts as
 * {@code reset}. Every way the worker's writes can be cut around the usage event and {@code [DONE]}.
 */
class HangUpAfterUsageTest {
  static final String GEN_REQ = "{\"kv_transfer_params\":{\"do_remote_prefill\":true}}";
  static final String STREAM = Wire.chatStream(Wire.usage(50, 4, 50L), "Par", "is");

  /** A streaming worker: each write a read of its own, the chunked terminator a write after [DONE]. */
  static Exchange.Builder sseGen(String key, String body) {
    return Exchange.post(FaultInjectionTest.PATH, GEN_REQ)
        .responseChunkDelay(java.time.Duration.ofMillis(5))
        .requestHeader("x-request-id", key)
        .responseHeader("content-type", "text/event-stream")
        .responseBody(body);
  }

  /** How the worker's writes reach Envoy: an event per read, or the usage and [DONE] in one read, or split mid-event. */
  static Stream<Arguments> cuts() {
    int usageAt = STREAM.indexOf(Wire.usageChunk(Wire.usage(50, 4, 50L)));
    int doneAt = STREAM.indexOf(Wire.DONE);
    return Stream.of(
        Arguments.of("an event per read", Chunking.sseEvents().withEmptyFinalChunk()),
        Arguments.of("usage and [DONE] in one read", Chunking.at(usageAt).withEmptyFinalChunk()),
        Arguments.of("usage cut mid-event", Chunking.at(usageAt + 40, doneAt).withEmptyFinalChunk()),
        Arguments.of("7-byte reads", Chunking.fixed(7).withEmptyFinalChunk()));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("cuts")
  void aClientClosingAfterDoneStillGetsItsExchangeAccounted(String name, Chunking cut) throws Exception {
    try (ServiceUnderTest s = new ServiceUnderTest(config(64 * 1024 * 1024))) {
      assertClean(Flows.run(s.envoy, ctx("h", Wire.chatCompletion("h", Wire.usage(50, 1, 10L)))));
      ExchangeResult g = s.envoy.execute(sseGen("h", STREAM).responseChunking(cut).clientClosesAfterReading(Wire.DONE).build());

      assertThat(g.clientResponse().reset()).as("the client hung up before Envoy's end of stream").isTrue();
      assertThat(g.clientResponse().bodyUtf8()).isEqualTo(STREAM.replace("{\"cached_tokens\":50}", "{\"cached_tokens\":10}"));
      assertThat(g.accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("rewritten");
      assertThat(g.accessLog("%DYNAMIC_METADATA(disagg_usage:cached_tokens)%")).isEqualTo("10");
      assertThat(g.accessLog("%DYNAMIC_METADATA(disagg_usage:reported_cached_tokens)%")).isEqualTo("50");
      s.awaitStreamsEnded();
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.REWRITTEN)).as("the exchange counted").isEqualTo(1);
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.RESET)).isZero();
      assertNoLeak(s);
    }
  }

  @Test
  void aResetBeforeTheUsageWentOutCountsAsReset() throws Exception {
    try (ServiceUnderTest s = new ServiceUnderTest(config(64 * 1024 * 1024))) {
      assertClean(Flows.run(s.envoy, ctx("r", Wire.chatCompletion("r", Wire.usage(50, 1, 10L)))));
      ExchangeResult g = s.envoy.execute(
          sseGen("r", STREAM).responseChunking(Chunking.sseEvents()).downstreamResetAfterResponseChunks(1).build());

      assertThat(g.clientResponse().reset()).isTrue();
      assertThat(g.accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("-");
      s.awaitStreamsEnded();
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.RESET)).as("the reset counted").isEqualTo(1);
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.REWRITTEN)).isZero();
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.ENVOY_GAVE_UP)).as("no reply was owed long").isZero();
      assertNoLeak(s);
    }
  }

  @Test
  void everyUsageEventPublishesItsFiguresAndTheLastOneWins() throws Exception {
    // vLLM's continuous_usage_stats: every chunk carries usage; each release publishes, the last counts.
    String stream = Wire.chunk("Par").replace("\"choices\"", "\"usage\":" + Wire.usage(50, 1, 50L) + ",\"choices\"")
        + Wire.chunk("is").replace("\"choices\"", "\"usage\":" + Wire.usage(50, 2, 50L) + ",\"choices\"")
        + Wire.usageChunk(Wire.usage(50, 2, 50L)) + Wire.DONE;
    try (ServiceUnderTest s = new ServiceUnderTest(config(64 * 1024 * 1024))) {
      assertClean(Flows.run(s.envoy, ctx("c", Wire.chatCompletion("c", Wire.usage(50, 1, 10L)))));
      ExchangeResult g = s.envoy.execute(
          sseGen("c", stream).responseChunking(Chunking.sseEvents().withEmptyFinalChunk()).clientClosesAfterReading(Wire.DONE).build());

      assertThat(g.clientResponse().bodyUtf8()).doesNotContain("\"cached_tokens\":50");
      assertThat(g.accessLog("%DYNAMIC_METADATA(disagg_usage:completion_tokens)%")).isEqualTo("2");
      assertThat(g.accessLog("%DYNAMIC_METADATA(disagg_usage:cached_tokens)%")).isEqualTo("10");
      s.awaitStreamsEnded();
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.REWRITTEN)).as("counted once").isEqualTo(1);
      assertNoLeak(s);
    }
  }

  @Test
  void aCleanEndCountsOnceAlthoughTheUsageWentOutEarlier() throws Exception {
    try (ServiceUnderTest s = new ServiceUnderTest(config(64 * 1024 * 1024))) {
      assertClean(Flows.run(s.envoy, ctx("e", Wire.chatCompletion("e", Wire.usage(50, 1, 10L)))));
      ExchangeResult g = s.envoy.execute(sseGen("e", STREAM).responseChunking(Chunking.sseEvents().withEmptyFinalChunk()).build());

      assertClean(g);
      assertThat(g.accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("rewritten");
      s.awaitStreamsEnded();
      assertThat(s.metrics.activeStreams()).as("stream closed").isZero();
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.REWRITTEN)).isEqualTo(1);
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.RESET)).isZero();
      assertNoLeak(s);
    }
  }
}
