package io.disaggusage.extproc.usage;

/**
 * The field names of one API shape's usage object. Chat/completions and completions say
 * {@code prompt_tokens}; the Responses API says {@code input_tokens} (behaviour.md §2). The Anthropic
 * Messages API also says {@code input_tokens}, but means the input read from no cache, and states its
 * cache counts as top-level members instead of a details object ({@link MessagesUsageRule}).
 */
public enum UsageNames {
  CHAT("prompt_tokens", "prompt_tokens_details", "completion_tokens"),
  RESPONSES("input_tokens", "input_tokens_details", "output_tokens"),
  /** Anthropic Messages ({@code /v1/messages}); it has no details object: {@link #promptDetails} is null. */
  MESSAGES("input_tokens", null, "output_tokens");

  public static final String TOTAL = "total_tokens";
  public static final String CACHED = "cached_tokens";
  /** Anthropic: input tokens read from the prompt cache. */
  public static final String CACHE_READ = "cache_read_input_tokens";
  /** Anthropic: input tokens written to the prompt cache. */
  public static final String CACHE_CREATION = "cache_creation_input_tokens";

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

  /**
   * The names used by a request path: the Responses API for {@code /v1/responses}, Anthropic Messages
   * for {@code /v1/messages}, chat otherwise.
   */
  public static UsageNames forPath(String path) {
    if (path == null) {
      return CHAT;
    }
    return path.endsWith("/responses") ? RESPONSES : path.endsWith("/messages") ? MESSAGES : CHAT;
  }

  /**
   * Guesses the shape from the keys a usage object has; for context usage of any shape. An Anthropic
   * usage without cache members reads as {@link #RESPONSES}, which gives the same context usage: its
   * {@code input_tokens} is then the whole prompt.
   */
  public static UsageNames detect(java.util.Set<String> keys) {
    if (keys.contains(CHAT.prompt) || !keys.contains(RESPONSES.prompt)) {
      return CHAT;
    }
    return keys.contains(CACHE_READ) || keys.contains(CACHE_CREATION) ? MESSAGES : RESPONSES;
  }
}
