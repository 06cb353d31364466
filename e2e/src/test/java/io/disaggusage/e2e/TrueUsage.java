package io.disaggusage.e2e;

import io.disaggusage.extproc.emulator.engines.OpenAiWire;
import io.disaggusage.extproc.emulator.engines.PrefixCache;
import io.disaggusage.extproc.emulator.engines.WordTokenizer;
import java.util.List;

/**
 * The usage a client must read: what the context (prefill) worker truly computed, replayed on a mirror of
 * its prefix cache. Every prompt the test sends to one prefill worker goes through {@link #next} in the
 * same order (prompts whose first 16 tokens differ are independent, so concurrent ones may come in any
 * order).
 */
final class TrueUsage {
  /** One exchange's truth; {@code total = prompt + completion}. */
  record Usage(long prompt, long cached, long completion) {
    long total() {
      return prompt + completion;
    }
  }

  private final WordTokenizer tokenizer = new WordTokenizer();
  private final PrefixCache mirror = new PrefixCache(PrefixCache.DEFAULT_BLOCK_TOKENS, 4096);

  /** The truth for a one-message chat request with {@code maxTokens} and {@code n} choices. */
  synchronized Usage next(String userMessage, int maxTokens, int n) {
    return next(tokenizer.encodeChat(List.of(new WordTokenizer.Message("user", userMessage))), maxTokens, n);
  }

  /** The truth for a legacy completions request with the {@code prompt} string (a begin marker and its tokens). */
  synchronized Usage nextCompletion(String prompt, int maxTokens, int n) {
    int[] text = tokenizer.encode(prompt);
    int[] tokens = new int[text.length + 1];
    tokens[0] = WordTokenizer.BEGIN_OF_TEXT;
    System.arraycopy(text, 0, tokens, 1, text.length);
    return next(tokens, maxTokens, n);
  }

  private Usage next(int[] prompt, int maxTokens, int n) {
    int cached = mirror.prefill(prompt);
    long completion = (long) OpenAiWire.answerPieces(tokenizer, maxTokens).size() * n;
    return new Usage(prompt.length, cached, completion);
  }
}
