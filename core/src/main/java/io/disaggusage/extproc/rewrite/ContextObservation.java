package io.disaggusage.extproc.rewrite;

import io.disaggusage.extproc.usage.ContextUsage;
import java.util.List;

/**
 * What a context response yielded once it ended.
 *
 * @param usage the context usage to store, or null (with {@code outcome} saying why)
 * @param contextIds TensorRT-LLM ids found in the response ({@code ctx_request_id}, ...), extra keys
 * @param model the response's model, or null
 */
public record ContextObservation(
    ContextUsage usage, List<String> contextIds, String model, Outcome outcome) {}
