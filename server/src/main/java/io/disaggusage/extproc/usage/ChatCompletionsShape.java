package io.disaggusage.extproc.usage;

import java.util.Set;

/**
 * Chat/completions and legacy completions ({@code /v1/chat/completions}, {@code /v1/completions}):
 * {@code prompt_tokens}, {@code prompt_tokens_details}, {@code completion_tokens}, usage at the root.
 * {@link ApiShapes} also gives it every path no shape serves. Its streams carry usage only when asked
 * ({@code stream_options.include_usage}), so requests may be made to ask.
 */
final class ChatCompletionsShape extends OpenAiShape {

  ChatCompletionsShape() {
    super("prompt_tokens", "prompt_tokens_details", "completion_tokens");
  }

  @Override
  public boolean serves(String path) {
    return path.endsWith("/completions");
  }

  @Override
  public Set<String> usageContainers() {
    return Set.of();
  }

  /** Any object stating {@code prompt_tokens}: it wins over every other shape's prompt member. */
  @Override
  public boolean recognises(Set<String> usageMembers) {
    return usageMembers.contains(promptMember());
  }

  @Override
  public boolean injectsIncludeUsage() {
    return true;
  }
}
