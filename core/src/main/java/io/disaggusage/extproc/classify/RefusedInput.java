package io.disaggusage.extproc.classify;

import io.disaggusage.extproc.label.LowerCaseLabel;
import java.util.Set;

/**
 * A request input the classifier did not follow because stronger evidence contradicted it, or because
 * it may not decide where it was found (behaviour.md §3, "Inputs a client can forge"). Each is what a
 * client can send and a router forwards to the worker legs; each refusal is counted and shown, so an
 * attempt is visible even though it changes nothing. The reported value is the {@linkplain #label()
 * label}.
 */
public enum RefusedInput implements LowerCaseLabel {
  /**
   * An {@code x-disagg-phase} header that names another phase than the one the cluster or a body marker
   * decided, or one present where {@code classification.phase_header: ignore} lets no header decide.
   */
  PHASE_HEADER,
  /**
   * A body with a TensorRT-LLM {@code disaggregated_params.request_type} and a vLLM {@code
   * kv_transfer_params} marker naming different phases: the vLLM marker decided.
   */
  MARKER_CONFLICT,
  /** A body marker naming another phase than the configured cluster: the cluster decided. */
  BODY_MARKER,
  /**
   * A {@code disaggregated_params.ctx_usage} on a leg that is not a TensorRT-LLM {@code generation_only}
   * request: it was not taken as the context usage.
   */
  CTX_USAGE,
  /** {@code x-trtllm-msgpack: 1} on a body that is JSON: the body was read as JSON. */
  MSGPACK_HEADER;

  /** The labels of {@code inputs}, comma-separated in declaration order; null when there are none. */
  public static String labels(Set<RefusedInput> inputs) {
    if (inputs.isEmpty()) {
      return null;
    }
    StringBuilder text = new StringBuilder();
    for (RefusedInput input : values()) {
      if (inputs.contains(input)) {
        text.append(text.length() == 0 ? "" : ",").append(input.label());
      }
    }
    return text.toString();
  }
}
