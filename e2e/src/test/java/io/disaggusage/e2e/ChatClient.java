package io.disaggusage.e2e;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.scenario.Wire;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.List;

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
  static final int MAX_TOKENS = 16;

  private static final ObjectMapper JSON = new ObjectMapper();

  private final String label;

  ChatClient(String label) {
    this.label = label;
  }

  boolean streams() {
    return this == SDK_STREAM || this == CURL_STREAM;
  }

  Reading call(String baseUrl, String prompt) throws IOException, InterruptedException {
    return switch (this) {
      case SDK, SDK_STREAM -> {
        Path script = Tools.root().resolve("e2e/src/test/resources/clients/sdk_client.py");
        String usage = ClientsTest.run(List.of(
            Tools.pythonClients().toString(), script.toString(), baseUrl, "chat", Boolean.toString(streams()), prompt)).trim();
        yield new Reading(null, JSON.readTree(usage));
      }
      case CURL, CURL_STREAM -> {
        String body = ClientsTest.run(List.of(
            Tools.curl().toString(), streams() ? "-sSN" : "-sS", "--fail", baseUrl + TrtLlmOrchestrator.CHAT_COMPLETIONS,
            "-H", "content-type: application/json", "-d", request(prompt)));
        yield new Reading(body, streams() ? lastUsage(body) : JSON.readTree(body).path("usage"));
      }
    };
  }

  /** The body curl sends: what the SDK sends for the same call. */
  private String request(String prompt) {
    ObjectNode body = JSON.createObjectNode().put("model", Wire.MODEL);
    body.putArray("messages").addObject().put("role", "user").put("content", prompt);
    body.put("max_tokens", MAX_TOKENS);
    if (streams()) {
      body.put("stream", true).putObject("stream_options").put("include_usage", true);
    }
    return body.toString();
  }

  /** The usage of the stream's last event that has one. */
  private static JsonNode lastUsage(String stream) {
    JsonNode usage = null;
    for (String event : stream.split("\n\n")) {
      String data = event.strip();
      if (data.startsWith("data: ") && !data.equals("data: [DONE]")) {
        try {
          JsonNode chunk = JSON.readTree(data.substring("data: ".length()));
          usage = chunk.path("usage").isObject() ? chunk.path("usage") : usage;
        } catch (IOException e) {
          throw new UncheckedIOException("not JSON in " + stream, e);
        }
      }
    }
    if (usage == null) {
      throw new AssertionError("no usage in the stream:\n" + stream);
    }
    return usage;
  }

  @Override
  public String toString() {
    return label;
  }
}
