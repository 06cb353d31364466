package io.disaggusage.extproc.stream;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.classify.ExchangeClassifier;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.rewrite.ResponseProcessors;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.store.ContextUsageStore;
import java.util.concurrent.ScheduledExecutorService;

/**
 * What every exchange stream shares: configuration, the pure core, the store, metrics, the timer, the
 * rate-limited warnings and the bound on concurrent context waits. The last two are made here, one of
 * each for the service built on these.
 */
final class ExchangeServices {
  private final Config config;
  private final ExchangeClassifier classifier;
  private final ResponseProcessors processors;
  private final JsonFactory json;
  private final ContextUsageStore store;
  private final Metrics metrics;
  private final ScheduledExecutorService timer;
  private final ExchangeWarnings warnings = new ExchangeWarnings();
  private final WaitLimiter waits;

  ExchangeServices(
      Config config,
      ExchangeClassifier classifier,
      ResponseProcessors processors,
      JsonFactory json,
      ContextUsageStore store,
      Metrics metrics,
      ScheduledExecutorService timer) {
    this.config = config;
    this.classifier = classifier;
    this.processors = processors;
    this.json = json;
    this.store = store;
    this.metrics = metrics;
    this.timer = timer;
    this.waits = new WaitLimiter(config.limits().maxWaiters());
  }

  Config config() {
    return config;
  }

  ExchangeClassifier classifier() {
    return classifier;
  }

  ResponseProcessors processors() {
    return processors;
  }

  JsonFactory json() {
    return json;
  }

  ContextUsageStore store() {
    return store;
  }

  Metrics metrics() {
    return metrics;
  }

  ScheduledExecutorService timer() {
    return timer;
  }

  /** Rate-limited warnings, shared by every stream of the service. */
  ExchangeWarnings warnings() {
    return warnings;
  }

  /** The bound on concurrent context waits ({@code limits.max_waiters}). */
  WaitLimiter waits() {
    return waits;
  }
}
