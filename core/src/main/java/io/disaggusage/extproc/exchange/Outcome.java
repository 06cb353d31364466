package io.disaggusage.extproc.exchange;

import io.disaggusage.extproc.label.LowerCaseLabel;
import io.disaggusage.extproc.usage.JsonUsageRewriter;

/**
 * How an exchange ended, as reported in metrics and dynamic metadata (behaviour.md §7). The reported
 * value is the {@linkplain #label() label}, the constant's name in lower case: renaming a constant
 * renames a metric label value.
 */
public enum Outcome implements LowerCaseLabel {
  /** The §2 rule was applied (even if nothing changed). */
  REWRITTEN,
  /** A context response whose usage was stored for its generation exchange. */
  STORED,
  /** Generation exchange without known context usage: passed through. */
  PASSTHROUGH_NO_CONTEXT,
  /** Concurrent / generation-first flow whose context usage did not arrive before the deadline. */
  CONTEXT_TIMEOUT,
  /**
   * Generation exchange whose keys held context usage of other flows only (a different prompt
   * fingerprint: a shared {@code X-Request-Id}, a forged context leg): passed through.
   */
  FINGERPRINT_MISMATCH,
  /** Body, event or usage object above its configured cap: passed through. */
  OVERSIZE,
  /** Body or usage that does not parse, a required count missing, details of the wrong type: passed through. */
  PARSE_ERROR,
  /** The response carried no usage object (the client did not ask for usage): nothing to rewrite. */
  NO_USAGE,
  /** Not part of a disaggregated flow, non-2xx, or compressed: passed through. */
  NOT_DISAGGREGATED,
  /** Internal error: the exchange was let through unmodified. */
  ERROR,
  /**
   * The ext_proc stream ended (a downstream reset, an upstream failure) before the exchange's usage
   * was released to the client or stored, with no reply of the service overdue: there were no figures
   * to count. An exchange reset after its usage went out counts with that usage's outcome instead; one
   * that ended with a reply overdue, as {@link #ENVOY_GAVE_UP}.
   */
  RESET,
  /**
   * The generation usage held a count that cannot be true (negative, fractional, not a number, cached
   * above the prompt; behaviour.md "Counts that cannot be true"): it went out corrected, from the
   * context usage where known, else clamped. Takes the place of {@link #REWRITTEN} and of the
   * pass-through outcomes of a body that was read.
   */
  IMPOSSIBLE_COUNT,
  /**
   * Envoy's per-message timer ran out while a reply of the service was owed (a store or context wait
   * longer than Envoy's {@code message_timeout}, a starved or frozen process): with {@code
   * failure_mode_allow} Envoy let the rest of the exchange through as the worker sent it. Takes the
   * place of {@link #RESET} when the stream ended with a reply overdue, and of the outcome the service
   * would have counted when its reply went out after Envoy's timer had run out.
   */
  ENVOY_GAVE_UP;

  /** The outcome of a usage object the rewriter rejected: above its cap, or not well-formed. */
  public static Outcome of(JsonUsageRewriter.Rejected rejected) {
    return rejected.reason() == JsonUsageRewriter.Reason.OVERSIZE_USAGE ? OVERSIZE : PARSE_ERROR;
  }
}
