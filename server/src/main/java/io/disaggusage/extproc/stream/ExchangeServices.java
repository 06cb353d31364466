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
 * rate-limited warnings and the bound on concurrent context waits. {@link ExtProcService} makes one
 * for all its streams.
 */
record ExchangeServices(
    Config config,
    ExchangeClassifier classifier,
    ResponseProcessors processors,
    JsonFactory json,
    ContextUsageStore store,
    Metrics metrics,
    ScheduledExecutorService timer,
    ExchangeWarnings warnings,
    WaitLimiter waits) {}
