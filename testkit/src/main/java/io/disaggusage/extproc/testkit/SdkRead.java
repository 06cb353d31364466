package io.disaggusage.extproc.testkit;

import java.util.List;

/**
 * How a client reads the usage of one kind of response body, with the official SDK of its API: what
 * {@link ExpectedUsage#clientUsages} is compared with. A body the SDK cannot read fails the test.
 */
public enum SdkRead {
  /** OpenAI {@code /v1/chat/completions}, JSON. */
  CHAT_COMPLETION(body -> List.of(OpenAiClientView.chatCompletion(body))),
  /** OpenAI {@code /v1/chat/completions}, SSE: every usage in order (continuous usage stats included). */
  CHAT_STREAM(body -> List.copyOf(OpenAiClientView.chatStreamUsagesValidated(body))),
  /** OpenAI legacy {@code /v1/completions}, JSON. */
  COMPLETION(body -> List.of(OpenAiClientView.completion(body))),
  /** OpenAI Responses API, JSON. */
  RESPONSE(body -> List.of(OpenAiClientView.response(body))),
  /** OpenAI Responses API, SSE: the usage of {@code response.completed}. */
  RESPONSE_STREAM(body -> List.of(OpenAiClientView.responseStream(body))),
  /** Anthropic Messages, JSON. */
  MESSAGE(body -> List.of(AnthropicClientView.message(body))),
  /** Anthropic Messages, SSE: the usage the SDK's accumulator ends with. */
  MESSAGE_STREAM(body -> List.of(AnthropicClientView.stream(body)));

  /** An SDK reading a body; it throws what the SDK throws on a body it cannot read. */
  @FunctionalInterface
  private interface Reader {
    List<Object> usages(String body) throws Exception;
  }

  private final Reader reader;

  SdkRead(Reader reader) {
    this.reader = reader;
  }

  /** The usages the SDK reads from {@code body}: {@link OpenAiClientView.ClientUsage}s or {@link AnthropicClientView.MessagesUsage}s. */
  public List<Object> usages(String body) throws Exception {
    return reader.usages(body);
  }
}
