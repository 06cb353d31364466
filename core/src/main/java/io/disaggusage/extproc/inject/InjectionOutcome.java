package io.disaggusage.extproc.inject;

import io.disaggusage.extproc.label.LowerCaseLabel;

/**
 * What {@code streaming.inject_include_usage} did with one request body on a handled path (metric
 * label {@code outcome} of {@code disagg_usage_include_usage_injections_total}, whose value is the
 * constant's {@linkplain #label() name in lower case}).
 */
public enum InjectionOutcome implements LowerCaseLabel {
  /** {@code include_usage: true} was added to the request. */
  INJECTED,
  /** The request already asked for usage ({@code include_usage: true}): left alone. */
  CLIENT_ASKED,
  /** {@code stream} is not {@code true}: the response carries usage anyway, nothing to add. */
  NOT_STREAMING,
  /** Neither a context nor a generation leg: its response is not read, so nothing is added. */
  OTHER_LEG,
  /**
   * {@code stream_options} without {@code include_usage}, on an engine whose default is not known to
   * be {@code false}: vLLM and TensorRT-LLM default to {@code true} and already send usage.
   */
  ENGINE_DEFAULT,
  /**
   * The client asked for {@code continuous_usage_stats} without {@code include_usage}: adding it
   * would put usage into every content event, which the service does not take out again.
   */
  CONTINUOUS_USAGE,
  /** A MessagePack body (TensorRT-LLM {@code X-TRTLLM-Msgpack: 1}): passed through. */
  MSGPACK,
  /**
   * A compressed or non-JSON request, or one whose response may come back compressed (the service
   * could not remove the added usage event): passed through.
   */
  UNSUPPORTED_ENCODING,
  /** Not a JSON object, a syntax error, or {@code stream_options}/{@code include_usage} of the wrong type. */
  MALFORMED,
  /** {@code stream_options} appears more than once at the top level: passed through. */
  AMBIGUOUS,
  /** The bytes held while deciding exceeded {@code limits.max_body_bytes}: passed through. */
  OVERSIZE,
  /** The response began before the request body ended: passed through from then on. */
  UNFINISHED,
  /** An internal error: the body passed through unchanged from the chunk where it happened. */
  ERROR
}
