package io.disaggusage.extproc.stream;

import io.disaggusage.extproc.classify.CorrelationKey;
import java.util.ArrayList;
import java.util.List;

/**
 * The keys a context leg stores its usage under: those its request was classified with, and, when
 * these are TensorRT-LLM's own or there are none, the TensorRT-LLM ids the context response names
 * ({@code ctx_request_id}, ...) as aliases. The generation request of a TensorRT-LLM flow may name the
 * flow by the id the context server gave it, which the context request could not know. Decided when
 * the leg starts; the ids are only known once the response has been read.
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

  /** The keys to store under, given the ids the response named; empty when there are none. */
  List<CorrelationKey> with(List<String> responseIds) {
    if (!takesAliases || responseIds.isEmpty()) {
      return classified;
    }
    List<CorrelationKey> keys = new ArrayList<>(classified);
    for (String id : responseIds) {
      CorrelationKey key = new CorrelationKey(CorrelationKey.Source.TRTLLM, id);
      if (!keys.contains(key) && id.length() <= maxKeyBytes) {
        keys.add(key);
      }
    }
    return keys;
  }
}
