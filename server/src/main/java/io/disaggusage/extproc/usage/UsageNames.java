package io.disaggusage.extproc.usage;

/**
 * The field names of one API shape's usage object. Chat/completions and completions say
 * {@code prompt_tokens}; the Responses API says {@code input_tokens} (behaviour.md §2).
 */
public enum UsageNames {
  CHAT("prompt_tokens", "prompt_tokens_details", "completion_tokens"),
  RESPONSES("input_tokens", "input_tokens_details", "output_tokens");

  public static final String TOTAL = "total_tokens";
  public static final String CACHED = "cached_tokens";

  private final String prompt;
  private final String promptDetails;
  private final String completion;

  UsageNames(String prompt, String promptDetails, String completion) {
    this.prompt = prompt;
    this.promptDetails = promptDetails;
    this.completion = completion;
  }

  public String prompt() {
    return prompt;
  }

  public String promptDetails() {
    return promptDetails;
  }

  public String completion() {
    return completion;
  }

  /** The names used by a request path: the Responses API for {@code /v1/responses}, chat otherwise. */
  public static UsageNames forPath(String path) {
    return path != null && path.endsWith("/responses") ? RESPONSES : CHAT;
  }

  /** Guesses the shape from the keys a usage object has; for context usage of either shape. */
  public static UsageNames detect(java.util.Set<String> keys) {
    return keys.contains(RESPONSES.prompt) && !keys.contains(CHAT.prompt) ? RESPONSES : CHAT;
  }
}
