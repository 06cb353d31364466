package io.disaggusage.extproc.rewrite;

import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.usage.UsageFigures;

/**
 * How a response body was handled, for dynamic metadata and metrics.
 *
 * @param figures the usage emitted to the client (or the worker's own when passed through), or null
 * @param corrected the emitted usage differs from the generation worker's
 * @param model the model the response names, or null
 */
public record ExchangeReport(Outcome outcome, UsageFigures figures, boolean corrected, String model) {}
