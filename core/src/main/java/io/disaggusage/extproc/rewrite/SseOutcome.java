package io.disaggusage.extproc.rewrite;

import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.usage.JsonUsageRewriter;

/**
 * Outcome reporting of an SSE generation leg: what became of its usage-bearing events, folded into
 * one {@link ExchangeReport} (the last usage event's outcome, corrected if any was), and how many of
 * them were handed out, for the caller to publish the report early.
 */
final class SseOutcome {
  private Outcome last = Outcome.NO_USAGE;
  private ExchangeReport lastReport;
  private boolean oversizeSeen;
  private boolean correctedAny;
  /** Some usage event held a count that cannot be true (it went out corrected). */
  private boolean impossibleAny;
  private String model;
  /** Usage-bearing events released, and those of them handed out. */
  private int released;
  private int taken;

  /** An event's JSON could not be parsed; it goes out as it came. */
  void parseError() {
    last = Outcome.PARSE_ERROR;
    lastReport = null;
  }

  /** An event went beyond the event size limit. */
  void oversizeEvent() {
    oversizeSeen = true;
  }

  /** Held events went beyond the limit and go out unmodified. */
  void heldOversize() {
    oversizeSeen = true;
    last = Outcome.OVERSIZE;
  }

  /** Notes the outcome of a usage-bearing event, which is released right after. */
  void record(Outcome outcome, ExchangeReport report) {
    released++;
    last = outcome;
    lastReport = report;
  }

  /** A usage-bearing event was rewritten under {@code applied}. */
  void rewritten(Outcome applied, JsonUsageRewriter.Rewritten r) {
    model(r.model());
    impossibleAny |= r.impossible();
    record(applied, new ExchangeReport(applied, r.figures(), r.corrected(), r.model()));
    correctedAny |= r.corrected();
  }

  /** The model an event names (null: unchanged). */
  void model(String named) {
    if (named != null) {
      model = named;
    }
  }

  /** Everything released so far was handed out. */
  void handedOut() {
    taken = released;
  }

  /** Usage-bearing events handed out. */
  int taken() {
    return taken;
  }

  /** The report so far; {@code oversizeEvents} is how many events the framer gave up for size. */
  ExchangeReport report(long oversizeEvents) {
    Outcome outcome = last;
    if (outcome == Outcome.NO_USAGE && (oversizeSeen || oversizeEvents > 0)) {
      outcome = Outcome.OVERSIZE;
    }
    if (lastReport != null && outcome == lastReport.outcome()) {
      return new ExchangeReport(
          impossibleAny ? Outcome.IMPOSSIBLE_COUNT : outcome, lastReport.figures(), correctedAny, model);
    }
    return new ExchangeReport(outcome, null, correctedAny, model);
  }
}
