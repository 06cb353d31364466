package io.disaggusage.extproc.stream;

import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.RESPONSE_BODY;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.rewrite.ExchangeReport;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.usage.UsageFigures;
import java.math.BigInteger;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * What an exchange is counted as once Envoy gave up on it: {@code envoy_gave_up}, whatever the service
 * made of it, and none of the figures it would have sent, which the client never received.
 */
class ExchangeRecordTest {
  static final ExchangeReport REWRITTEN =
      new ExchangeReport(
          Outcome.REWRITTEN,
          new UsageFigures(BigInteger.valueOf(101), BigInteger.valueOf(7), BigInteger.valueOf(13), BigInteger.valueOf(114),
              BigInteger.valueOf(101)),
          true,
          "m");

  long now;
  final EnvoyTimers timers = new EnvoyTimers(Duration.ofMillis(200), () -> now);
  final Metrics metrics = Metrics.standalone();
  final ExchangeRecord record = new ExchangeRecord(metrics, timers);

  @Test
  void aGenerationReportInTimeCountsItsOutcomeAndTokens() {
    timers.received(RESPONSE_BODY);
    now += TimeUnit.MILLISECONDS.toNanos(EnvoyTimersTest.RUNS_OUT - 1);
    record.countGeneration(REWRITTEN);
    assertThat(metrics.exchangeCount(Phase.GENERATION, Outcome.REWRITTEN)).isEqualTo(1);
    assertThat(metrics.tokenCount("m", "cached")).isEqualTo(7);
  }

  @Test
  void aGenerationReportWhoseReplyIsLateCountsEnvoyGaveUpWithoutTokens() {
    timers.received(RESPONSE_BODY);
    now += TimeUnit.MILLISECONDS.toNanos(EnvoyTimersTest.RUNS_OUT); // the reply about to carry it comes too late
    record.countGeneration(REWRITTEN);
    assertThat(metrics.exchangeCount(Phase.GENERATION, Outcome.ENVOY_GAVE_UP)).isEqualTo(1);
    assertThat(metrics.exchangeCount(Phase.GENERATION, Outcome.REWRITTEN)).isZero();
    assertThat(metrics.tokenCount("m", "cached")).isZero();
  }

  @Test
  void anyOutcomeReportedAfterEnvoyGaveUpCountsEnvoyGaveUp() {
    timers.received(RESPONSE_BODY);
    now += TimeUnit.MILLISECONDS.toNanos(250);
    timers.ended();
    record.report(Phase.CONTEXT, Outcome.STORED); // a store write that landed after the stream ended
    record.report(Phase.CONTEXT, Outcome.ERROR);
    assertThat(metrics.exchangeCount(Phase.CONTEXT, Outcome.ENVOY_GAVE_UP)).isEqualTo(1);
    assertThat(metrics.exchangeCount(Phase.CONTEXT, Outcome.STORED)).isZero();
  }

  @Test
  void aResetWithNothingOverdueStaysAReset() {
    timers.received(RESPONSE_BODY);
    now += TimeUnit.MILLISECONDS.toNanos(50);
    timers.ended();
    now += TimeUnit.SECONDS.toNanos(5);
    record.report(Phase.GENERATION, Outcome.RESET);
    assertThat(metrics.exchangeCount(Phase.GENERATION, Outcome.RESET)).isEqualTo(1);
    assertThat(metrics.exchangeCount(Phase.GENERATION, Outcome.ENVOY_GAVE_UP)).isZero();
  }
}
