package io.disaggusage.extproc.emulator.engines;

import java.util.Locale;

/**
 * Which decode-side usage a simulated generation worker reports (engines.md §1.7, §2.2, §4.2): the bug
 * an engine release shipped, or what the release with the upstream fix reports.
 */
public enum UsageVariant {
  /**
   * The engine's documented miscount: TensorRT-LLM the whole transferred prompt, vLLM NIXL
   * {@code prompt_tokens - 1}, SGLang with decode radix cache the prefill's count plus its own.
   */
  BUG,
  /** vLLM with the connectors that count the whole transferred prompt (engines.md §2.2, #47136). */
  WHOLE_PROMPT_BUG,
  /** The fixed release: the prefill's own prefix-cache count reaches the client. */
  FIXED;

  /** The command-line spelling, e.g. {@code whole-prompt-bug}. */
  public String label() {
    return name().toLowerCase(Locale.ROOT).replace('_', '-');
  }

  /** The variant spelled {@code label}. */
  public static UsageVariant fromLabel(String label) {
    for (UsageVariant v : values()) {
      if (v.label().equals(label)) {
        return v;
      }
    }
    throw new IllegalArgumentException("\"" + label + "\": expected bug, whole-prompt-bug or fixed");
  }
}
