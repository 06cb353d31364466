package io.disaggusage.extproc.usage;

import java.util.Set;

/**
 * Chat/completions and legacy completions ({@code /v1/chat/completions}, {@code /v1/completions}):
 * {@code prompt_tokens}, {@code prompt_tokens_details}, {@code completion_tokens}, usage at the root.
 * {@link ApiShapes} also gives it every path no shape serves, and it recognises a context usage before
 * any other shape. Its streams carry usage only when asked ({@code stream_options.include_usage}), so
 * requests may be made to ask.
 */
final class ChatCompletionsShape extends OpenAiShape {

  ChatCompletionsShape() {
    super(UsageFields.CHAT, "/completions", Set.of(), true, "prompt_tokens", "prompt_tokens_details", "completion_tokens");
  }
}
