package io.disaggusage.extproc.usage;

import java.util.Set;

/**
 * The OpenAI Responses API ({@code /v1/responses}): {@code input_tokens}, {@code input_tokens_details},
 * {@code output_tokens}; usage at the root of a JSON body and inside {@code response} in stream events
 * such as {@code response.completed}. Its streams report usage unasked, so requests are left alone. An
 * Anthropic usage without cache members reads as this shape, which gives the same context usage: its
 * {@code input_tokens} is then the whole prompt.
 */
final class ResponsesShape extends OpenAiShape {

  ResponsesShape() {
    super(UsageFields.RESPONSES, "/responses", Set.of("response"), false, "input_tokens", "input_tokens_details", "output_tokens");
  }
}
