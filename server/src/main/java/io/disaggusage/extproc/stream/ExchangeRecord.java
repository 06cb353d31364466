package io.disaggusage.extproc.stream;

import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.classify.RefusedInput;
import io.disaggusage.extproc.rewrite.ExchangeReport;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.logtext.LogText;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.UsageFigures;
import java.math.BigInteger;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Counts one exchange's outcome, once, and writes its summary line: the logger {@value
 * ExchangeStream#SUMMARY_LOGGER} gets one DEBUG line with phase, outcome, the correlation key and model
 * bounded by {@link LogText}, the token counts, response body bytes in and out so far, and the time
 * since the stream opened. Never body bytes. Guarded by the owning stream's monitor.
 *
 * <p>An exchange Envoy gave up on before it was counted ({@link EnvoyTimers#gaveUp()}) counts as {@link
 * Outcome#ENVOY_GAVE_UP}, whatever outcome it is reported with: Envoy let the rest of it through as the
 * worker sent it, so neither the outcome nor the figures the service made reached the client.
 */
final class ExchangeRecord {
  private static final Logger summary = LoggerFactory.getLogger(ExchangeStream.SUMMARY_LOGGER);

  private final Metrics metrics;
  private final EnvoyTimers timers;
  private final long openedNanos = System.nanoTime();
  private boolean reported;
  /** The request's model, or null. */
  private String model;
  private CorrelationKey logKey;
  /** Response body bytes received so far. */
  private long bytesIn;
  private long bytesOut;
  private ExchangeReport generationReport;
  private ContextUsage storedUsage;
  private String refused;

  ExchangeRecord(Metrics metrics, EnvoyTimers timers) {
    this.metrics = metrics;
    this.timers = timers;
  }

  /**
   * The request was classified: its model and first key name the exchange, and the inputs it refused
   * are counted now (a refusal is an attempt whatever becomes of the exchange) and shown in its metadata.
   */
  void classified(String model, CorrelationKey firstKey, Set<RefusedInput> refused, Phase phase) {
    this.model = model;
    if (firstKey != null) {
      logKey = firstKey;
    }
    this.refused = RefusedInput.labels(refused);
    metrics.refused(refused, phase);
  }

  /** The labels of the inputs the classifier refused, comma-separated; null when it refused none. */
  String refused() {
    return refused;
  }

  /** The first key the context usage is stored under: names the exchange when the request named none. */
  void storingUnder(CorrelationKey key) {
    if (logKey == null) {
      logKey = key;
    }
  }

  /** The context usage about to be stored (its counts go in the summary). */
  void storing(ContextUsage usage) {
    storedUsage = usage;
  }

  String model() {
    return model;
  }

  void received(int bytes) {
    bytesIn += bytes;
  }

  long bytesIn() {
    return bytesIn;
  }

  void sent(int bytes) {
    bytesOut += bytes;
  }

  boolean reported() {
    return reported;
  }

  /** Counts the exchange's outcome; only the first call counts. */
  void report(Phase phase, Outcome outcome) {
    if (!reported) {
      reported = true;
      Outcome counted = timers.gaveUp() ? Outcome.ENVOY_GAVE_UP : outcome;
      metrics.exchange(phase, counted);
      if (summary.isDebugEnabled()) {
        logSummary(phase, counted);
      }
    }
  }

  /** Counts the generation exchange's final report (tokens and outcome), once. */
  void countGeneration(ExchangeReport report) {
    if (!reported && timers.gaveUp()) {
      report(Phase.GENERATION, Outcome.ENVOY_GAVE_UP); // no tokens: the client got the worker's own
    } else if (!reported) {
      generationReport = report;
      metrics.generation(report.model() != null ? report.model() : model, report.figures(), report.outcome());
      report(Phase.GENERATION, report.outcome());
    }
  }

  /** The exchange's DEBUG line: numbers, sizes, a bounded key and model; never body bytes. */
  private void logSummary(Phase phase, Outcome outcome) {
    UsageFigures figures = generationReport == null ? null : generationReport.figures();
    BigInteger prompt = figures != null ? figures.prompt() : null;
    BigInteger cached = figures != null ? figures.cached() : null;
    if (figures == null && storedUsage != null) {
      prompt = storedUsage.promptTokens();
      cached = storedUsage.cachedTokens();
    }
    String reportModel = generationReport == null ? null : generationReport.model();
    summary.debug(
        "exchange phase={} outcome={} key={} model={} prompt={} cached={} reported_cached={}"
            + " completion={} total={} corrected={} refused={} bytes_in={} bytes_out={} duration_ms={}",
        phase.label(),
        outcome.label(),
        logKey == null ? "-" : logKey.source().prefix() + ":" + LogText.bounded(logKey.value()),
        LogText.bounded(reportModel != null ? reportModel : model),
        number(prompt),
        number(cached),
        number(figures == null ? null : figures.reportedCached()),
        number(figures == null ? null : figures.completion()),
        number(figures == null ? null : figures.total()),
        generationReport != null && generationReport.corrected(),
        refused == null ? "-" : refused,
        bytesIn,
        bytesOut,
        TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - openedNanos));
  }

  private static Object number(BigInteger value) {
    return value == null ? "-" : value;
  }
}
