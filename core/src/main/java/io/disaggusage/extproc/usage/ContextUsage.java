package io.disaggusage.extproc.usage;

import java.math.BigInteger;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * What the generation rewrite needs from a context worker's usage ({@code C} in behaviour.md §2), in
 * one form whichever API shape the context worker answered in (behaviour.md, "Anthropic Messages"):
 * the whole prompt, and how much of it the context worker read from and wrote to its cache.
 *
 * @param promptTokens the whole prompt: {@code C.prompt_tokens} (or Responses {@code input_tokens});
 *     for Anthropic usage {@code input_tokens + cache_read_input_tokens + cache_creation_input_tokens}
 * @param details every key of {@code C.prompt_tokens_details} (or {@code input_tokens_details}) with its
 *     value as compact JSON text, in the context worker's order; {@code cached_tokens} included when
 *     present. For Anthropic usage: {@code cached_tokens} = its cache read count when it states one.
 *     Empty when C had no details object.
 * @param cachedTokens {@code C}'s cached (cache read) token count, 0 when C had no details or a
 *     null/missing count
 * @param cacheCreationTokens Anthropic {@code cache_creation_input_tokens}; null when C did not state
 *     one (every OpenAI-shaped usage)
 * @param claimed C was carried in the generation request (TensorRT-LLM's {@code ctx_usage}), not read
 *     from a context response the service saw: a request body field a client could have written, so
 *     the rule lets it bill no less than the generation worker's own usage ({@link #boundedBy})
 */
public record ContextUsage(
    BigInteger promptTokens,
    Map<String, String> details,
    BigInteger cachedTokens,
    BigInteger cacheCreationTokens,
    boolean claimed) {

  public ContextUsage {
    Objects.requireNonNull(promptTokens, "promptTokens");
    Objects.requireNonNull(cachedTokens, "cachedTokens");
    if (promptTokens.signum() < 0 || cachedTokens.signum() < 0
        || (cacheCreationTokens != null && cacheCreationTokens.signum() < 0)) {
      throw new IllegalArgumentException("token counts must be non-negative");
    }
    details = Collections.unmodifiableMap(new LinkedHashMap<>(details));
  }

  /** A context usage read from a context response. */
  public ContextUsage(
      BigInteger promptTokens, Map<String, String> details, BigInteger cachedTokens, BigInteger cacheCreationTokens) {
    this(promptTokens, details, cachedTokens, cacheCreationTokens, false);
  }

  /** An OpenAI-shaped context usage, which states no cache creation count. */
  public ContextUsage(BigInteger promptTokens, Map<String, String> details, BigInteger cachedTokens) {
    this(promptTokens, details, cachedTokens, null);
  }

  /** This usage as carried in a generation request ({@link #claimed}). */
  public ContextUsage asClaim() {
    return new ContextUsage(promptTokens, details, cachedTokens, cacheCreationTokens, true);
  }

  /**
   * A claimed usage bounded by the generation worker's own counts, so that it can only bill at least
   * what the worker reported: the prompt no smaller than the worker's ({@code gPrompt}, null when it
   * stated none), the cached count no larger than the worker's ({@code gCached}, 0 when it stated none).
   * An honest claim is unchanged by it: both legs count the same prompt, and the generation worker
   * reports at least the context worker's cache hits (the received prompt KV counts as cached there,
   * or it reports the context's count itself, TensorRT-LLM since #14177).
   */
  public ContextUsage boundedBy(BigInteger gPrompt, BigInteger gCached) {
    BigInteger prompt = gPrompt == null ? promptTokens : promptTokens.max(gPrompt);
    BigInteger cached = cachedTokens.min(gCached);
    Map<String, String> bounded = new LinkedHashMap<>(details);
    bounded.computeIfPresent(OpenAiShape.CACHED, (k, v) -> v.equals("null") ? v : cached.toString());
    return new ContextUsage(prompt, bounded, cached, cacheCreationTokens, false);
  }

  /**
   * Whether C said anything about its cache: a non-null {@code cached_tokens} in its details, or an
   * Anthropic cache creation count. When it did not, the cache split of the prompt is unknown.
   */
  public boolean statesCache() {
    String cached = details.get(OpenAiShape.CACHED);
    return (cached != null && !cached.equals("null")) || cacheCreationTokens != null;
  }
}
