package io.disaggusage.extproc.rewrite;

import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.usage.ContextUsage;
import java.util.List;

/**
 * What a context response yielded once it ended.
 *
 * @param usage the context usage to store, or null (with {@code outcome} saying why)
 * @param contextIds TensorRT-LLM ids found in the response ({@code ctx_request_id}, ...), extra keys
 * @param kvRemoteRequestId vLLM's {@code kv_transfer_params.remote_request_id} in the response, an extra
 *     key (a JSON response's only: vLLM's prefill legs do not stream), or null
 * @param model the response's model, or null
 */
public record ContextObservation(
    ContextUsage usage, List<String> contextIds, String kvRemoteRequestId, String model, Outcome outcome) {

  /** Nothing usable: no usage, ids or model, and why. */
  public static ContextObservation none(Outcome outcome) {
    return new ContextObservation(null, List.of(), null, null, outcome);
  }
}
