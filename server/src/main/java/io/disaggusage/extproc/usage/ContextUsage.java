package io.disaggusage.extproc.usage;

import java.math.BigInteger;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * What the generation rewrite needs from a context worker's usage ({@code C} in behaviour.md §2).
 *
 * @param promptTokens {@code C.prompt_tokens} (or {@code input_tokens}), a non-negative integer
 * @param details every key of {@code C.prompt_tokens_details} (or {@code input_tokens_details}) with its
 *     value as compact JSON text, in the context worker's order; {@code cached_tokens} included when
 *     present. Empty when C had no details object.
 * @param cachedTokens {@code C}'s cached token count, 0 when C had no details or a null/missing count
 */
public record ContextUsage(BigInteger promptTokens, Map<String, String> details, BigInteger cachedTokens) {

  public ContextUsage {
    Objects.requireNonNull(promptTokens, "promptTokens");
    Objects.requireNonNull(cachedTokens, "cachedTokens");
    if (promptTokens.signum() < 0 || cachedTokens.signum() < 0) {
      throw new IllegalArgumentException("token counts must be non-negative");
    }
    details = Collections.unmodifiableMap(new LinkedHashMap<>(details));
  }
}
