package io.disaggusage.extproc.usage;

import java.util.Set;

/**
 * The OpenAI Responses API ({@code /v1/responses}): {@code input_tokens}, {@code input_tokens_details},
 * {@code output_tokens}; usage at the root of a JSON body and inside {@code response} in stream events
 * such as {@code response.completed}. Its streams report usage unasked, so requests are left alone.
 */
final class ResponsesShape extends OpenAiShape {

  ResponsesShape() {
    super("input_tokens", "input_tokens_details", "output_tokens");
  }

  @Override
  public boolean serves(String path) {
    return path.endsWith("/responses");
  }

  @Override
  public Set<String> usageContainers() {
    return Set.of("response");
  }

  /**
   * Any object stating {@code input_tokens}. An Anthropic usage without cache members reads as this
   * shape, which gives the same context usage: its {@code input_tokens} is then the whole prompt.
   */
  @Override
  public boolean recognises(Set<String> usageMembers) {
    return usageMembers.contains(promptMember());
  }

  @Override
  public boolean injectsIncludeUsage() {
    return false;
  }
}
