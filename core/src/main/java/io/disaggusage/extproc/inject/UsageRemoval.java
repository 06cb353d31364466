package io.disaggusage.extproc.inject;

import io.disaggusage.extproc.label.LowerCaseLabel;

/**
 * What became of the usage event that an injected request made the engine send (metric label
 * {@code result} of {@code disagg_usage_injected_usage_events_total}, whose value is the constant's
 * {@linkplain #label() name in lower case}); one per injected exchange.
 */
public enum UsageRemoval implements LowerCaseLabel {
  /** Taken out of the stream after its numbers were used: the client saw what it would have seen. */
  REMOVED,
  /** The response had none (an error status, a JSON body, or a stream that carried no usage). */
  ABSENT,
  /**
   * The service could not take it out (a compressed response, or the exchange was abandoned after an
   * internal error): the client received it.
   */
  LEAKED
}
