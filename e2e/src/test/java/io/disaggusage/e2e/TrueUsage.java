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
    int[] prompt = tokenizer.encodeChat(List.of(new WordTokenizer.Message("user", userMessage)));
    int cached = mirror.prefill(prompt);
    long completion = (long) OpenAiWire.answerPieces(tokenizer, maxTokens).size() * n;
    return new Usage(prompt.length, cached, completion);
  }
}
