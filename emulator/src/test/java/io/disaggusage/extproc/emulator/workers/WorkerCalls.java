package io.disaggusage.extproc.emulator.workers;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/** HTTP calls to a worker as an orchestrator or router makes them, and readers for their answers. */
final class WorkerCalls {
  static final ObjectMapper JSON = new ObjectMapper();
  private static final HttpClient CLIENT =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(5)).build();

  private WorkerCalls() {}

  /** POSTs {@code body} to the worker's chat completions, with header name/value pairs. */
  static HttpResponse<String> post(EngineWorker worker, String body, String... headers) throws Exception {
    return post(worker, body.getBytes(java.nio.charset.StandardCharsets.UTF_8), headers);
  }

  /** POSTs a binary body (MessagePack, as TensorRT-LLM's orchestrator sends) with the JSON content type. */
  static HttpResponse<String> post(EngineWorker worker, byte[] body, String... headers) throws Exception {
    return postTo(worker, "v1/chat/completions", body, headers);
  }

  /** POSTs {@code body} to the worker's legacy completions, with header name/value pairs. */
  static HttpResponse<String> postCompletion(EngineWorker worker, String body, String... headers) throws Exception {
    return postTo(worker, "v1/completions", body.getBytes(java.nio.charset.StandardCharsets.UTF_8), headers);
  }

  private static HttpResponse<String> postTo(EngineWorker worker, String path, byte[] body, String... headers) throws Exception {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(worker.url().resolve(path))
            .timeout(Duration.ofSeconds(20))
            .header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofByteArray(body));
    for (int i = 0; i < headers.length; i += 2) {
      request.header(headers[i], headers[i + 1]);
    }
    return CLIENT.send(request.build(), HttpResponse.BodyHandlers.ofString());
  }

  static HttpResponse<String> get(EngineWorker worker, String path) throws Exception {
    return CLIENT.send(
        HttpRequest.newBuilder(worker.url().resolve(path.substring(1))).timeout(Duration.ofSeconds(5)).GET().build(),
        HttpResponse.BodyHandlers.ofString());
  }

  static JsonNode json(String text) {
    try {
      return JSON.readTree(text);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The JSON of each {@code data:} event of a stream, {@code [DONE]} left out. */
  static List<JsonNode> events(String stream) {
    List<JsonNode> events = new ArrayList<>();
    for (String event : stream.split("\n\n")) {
      String data = event.strip();
      if (data.startsWith("data: ") && !data.equals("data: [DONE]")) {
        events.add(json(data.substring(6)));
      }
    }
    return events;
  }

  /** A chat request body: {@code extra} is spliced in as further top-level fields, e.g. {@code "n":2}. */
  static String chat(String content, String extra) {
    return "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"" + content + "\"}]"
        + (extra.isEmpty() ? "" : "," + extra) + "}";
  }

  /** A legacy completions request body with {@code prompt}: {@code extra} is spliced in as further top-level fields. */
  static String completion(String prompt, String extra) {
    return "{\"model\":\"m\",\"prompt\":\"" + prompt + "\"" + (extra.isEmpty() ? "" : "," + extra) + "}";
  }

  /** A prompt long enough to fill several 16-token cache blocks. */
  static final String LONG_PROMPT =
      "Summarise the operating manual of the reactor cooling loop in three short sentences, naming every"
          + " valve, pump and sensor on the primary and secondary circuits, and the order in which an"
          + " operator checks them after a scram, with the expected readings at each step";
}
