package io.disaggusage.extproc.stream;

import io.disaggusage.extproc.classify.CorrelationKey;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The keys a context leg stores its usage under: those its request was classified with, and, when
 * these are TensorRT-LLM's own or there are none, the TensorRT-LLM ids the context response names
 * ({@code ctx_request_id}, ...) as aliases; and always the {@code kv_transfer_params.remote_request_id}
 * a vLLM prefill response names. The generation request of a TensorRT-LLM flow may name the flow by
 * the id the context server gave it, and a vLLM decode request the prefill's handle for its KV
 * transfer, which the context request could not know. Decided when the leg starts; the ids are only
 * known once the response has been read.
 */
final class ContextStoreKeys {
  private final List<CorrelationKey> classified;
  private final boolean takesAliases;
  private final int maxKeyBytes;

  /**
   * @param classified the keys of the context request, in lookup order
   * @param maxKeyBytes {@code limits.max_key_bytes}: a longer id is no alias
   */
  ContextStoreKeys(List<CorrelationKey> classified, int maxKeyBytes) {
    this.classified = List.copyOf(classified);
    this.takesAliases =
        classified.isEmpty() || classified.get(0).source() == CorrelationKey.Source.TRTLLM;
    this.maxKeyBytes = maxKeyBytes;
  }

  /**
   * The keys to store under, given the TensorRT-LLM ids and the vLLM KV transfer handle (or null) the
   * response named; empty when there are none.
   */
  List<CorrelationKey> with(List<String> responseIds, String kvRemoteRequestId) {
    List<CorrelationKey> keys = new ArrayList<>(classified);
    if (takesAliases) {
      for (String id : responseIds) {
        add(keys, new CorrelationKey(CorrelationKey.Source.TRTLLM, id));
      }
    }
    if (kvRemoteRequestId != null && !kvRemoteRequestId.isEmpty()) {
      add(keys, new CorrelationKey(CorrelationKey.Source.REMOTE_REQUEST_ID, kvRemoteRequestId));
    }
    return keys;
  }

  private void add(List<CorrelationKey> keys, CorrelationKey key) {
    if (!keys.contains(key) && key.value().getBytes(StandardCharsets.UTF_8).length <= maxKeyBytes) {
      keys.add(key);
    }
  }
}
