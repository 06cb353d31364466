package io.disaggusage.e2e;

import com.fasterxml.jackson.databind.JsonNode;
import io.disaggusage.extproc.testkit.Wire;

/**
 * A real client sending one chat completion (one user message, {@code max_tokens} 16) to an orchestrator,
 * and the usage it read: the official OpenAI Python SDK, streaming and not, and curl, {@code -s} and
 * {@code -N}. Streaming calls ask for {@code stream_options.include_usage}, as the SDK documents.
 */
enum ChatClient {
  SDK("OpenAI SDK"),
  SDK_STREAM("OpenAI SDK, stream"),
  CURL("curl -s"),
  CURL_STREAM("curl -N");

  /** What the client read: the response body (curl only; the SDK prints its parsed usage) and the usage. */
  record Reading(String body, JsonNode usage) {}

  /** What {@code sdk_client.py} asks for; curl sends the same. */
  static final int MAX_TOKENS = RouterClients.SDK_MAX_TOKENS;

  private final String label;

  ChatClient(String label) {
    this.label = label;
  }

  boolean streams() {
    return this == SDK_STREAM || this == CURL_STREAM;
  }

  Reading call(String baseUrl, String prompt) {
    return switch (this) {
      case SDK, SDK_STREAM -> new Reading(null, RouterClients.sdkChatUsage(baseUrl, prompt, streams()));
      case CURL, CURL_STREAM -> {
        String body = RouterClients.curl(baseUrl + TrtLlmOrchestrator.CHAT_COMPLETIONS,
            RouterClients.chat(Wire.MODEL, prompt, MAX_TOKENS, 1, streams()), streams());
        yield new Reading(body, RouterClients.usage(body, streams()));
      }
    };
  }

  @Override
  public String toString() {
    return label;
  }
}
