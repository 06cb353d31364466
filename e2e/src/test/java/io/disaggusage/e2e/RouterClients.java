package io.disaggusage.e2e;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.e2e.TrueUsage.Usage;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** The clients of the router tests: curl as in the reproduction ({@code -s} JSON, {@code -N} SSE) and the OpenAI SDK. */
final class RouterClients {
  static final ObjectMapper JSON = new ObjectMapper();
  /** The {@code max_tokens} of {@code sdk_client.py}'s chat call. */
  static final int SDK_MAX_TOKENS = 16;

  private RouterClients() {}

  /** A chat request body with one user message; streaming ones ask for usage. */
  static String chat(String model, String message, int maxTokens, int n, boolean stream) {
    ObjectNode body = JSON.createObjectNode().put("model", model);
    body.putArray("messages").addObject().put("role", "user").put("content", message);
    body.put("max_tokens", maxTokens);
    if (n != 1) {
      body.put("n", n);
    }
    if (stream) {
      body.put("stream", true).putObject("stream_options").put("include_usage", true);
    }
    return body.toString();
  }

  /** A legacy completions request body with the {@code prompt} string; streaming ones ask for usage. */
  static String completion(String model, String prompt, int maxTokens, boolean stream) {
    ObjectNode body = JSON.createObjectNode().put("model", model).put("prompt", prompt).put("max_tokens", maxTokens);
    if (stream) {
      body.put("stream", true).putObject("stream_options").put("include_usage", true);
    }
    return body.toString();
  }

  /** What curl printed for a POST of {@code body} to the router's chat completions. */
  static String curl(RouterDeployment deployment, String body, boolean stream) {
    return curl(deployment, body, stream, Map.of());
  }

  /** What curl printed for a POST of {@code body} with {@code headers} to the router's chat completions. */
  static String curl(RouterDeployment deployment, String body, boolean stream, Map<String, String> headers) {
    return curl(deployment.url("/v1/chat/completions"), body, stream, headers);
  }

  /** What curl printed for a POST of {@code body} to {@code url} ({@code -N} when streaming). */
  static String curl(String url, String body, boolean stream) {
    return curl(url, body, stream, Map.of());
  }

  /** What curl printed for a POST of {@code body} with {@code headers} to {@code url} ({@code -N} when streaming). */
  static String curl(String url, String body, boolean stream, Map<String, String> headers) {
    List<String> command = new ArrayList<>(List.of(Tools.curl().toString(), "-sS"));
    if (stream) {
      command.add("-N");
    }
    command.addAll(List.of("--fail", url, "-H", "content-type: application/json"));
    headers.forEach((name, value) -> command.addAll(List.of("-H", name + ": " + value)));
    command.addAll(List.of("-d", body));
    return run(command);
  }

  /** The usage the OpenAI Python SDK parsed from a chat call with {@code message} and {@link #SDK_MAX_TOKENS}. */
  static JsonNode sdkChatUsage(RouterDeployment deployment, String message, boolean stream) {
    return sdkChatUsage(deployment.url(""), message, stream);
  }

  /** The same against any OpenAI-compatible {@code baseUrl}. */
  static JsonNode sdkChatUsage(String baseUrl, String message, boolean stream) {
    return sdkUsage(baseUrl, "chat", message, stream);
  }

  /** The usage the OpenAI Python SDK parsed from a call of {@code api} ({@code chat}, {@code completions}, …). */
  static JsonNode sdkUsage(String baseUrl, String api, String message, boolean stream) {
    String script = Tools.root().resolve("e2e/src/test/resources/clients/sdk_client.py").toString();
    return parseJson(run(List.of(
        Tools.pythonClients().toString(), script, baseUrl, api, Boolean.toString(stream), message)).trim());
  }

  /** The usage object of a JSON body, or of the last SSE event that carries one. */
  static JsonNode usage(String body, boolean stream) {
    if (!stream) {
      return parseJson(body).path("usage");
    }
    JsonNode usage = null;
    for (String line : body.split("\n")) {
      if (line.startsWith("data: {")) {
        JsonNode event = parseJson(line.substring("data: ".length()));
        if (event.hasNonNull("usage")) {
          usage = event.get("usage");
        }
      }
    }
    if (usage == null) {
      throw new AssertionError("no event carries usage in:\n" + body);
    }
    return usage;
  }

  /** The usage in the OpenAI shape a client reads, for comparison with the truth. */
  static Usage read(JsonNode usage) {
    if (usage.path("total_tokens").asLong() != usage.path("prompt_tokens").asLong() + usage.path("completion_tokens").asLong()) {
      throw new AssertionError("total_tokens is not prompt + completion in " + usage);
    }
    return new Usage(usage.path("prompt_tokens").asLong(), usage.path("prompt_tokens_details").path("cached_tokens").asLong(),
        usage.path("completion_tokens").asLong());
  }

  static JsonNode parseJson(String json) {
    try {
      return JSON.readTree(json);
    } catch (IOException e) {
      throw new UncheckedIOException("not JSON: " + json, e);
    }
  }

  static String run(List<String> command) {
    try {
      return ClientsTest.run(command);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
