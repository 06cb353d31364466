package io.disaggusage.e2e;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import io.disaggusage.e2e.TrtLlmRelease.ScheduleStyle;
import io.disaggusage.extproc.testkit.LoopbackServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpResponse.BodyHandler;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.function.LongSupplier;

/**
 * {@code trtllm-serve disaggregated}'s orchestrator as a test fixture, because the real one cannot start
 * without CUDA (importing {@code tensorrt_llm} initialises torch and its native libraries). It follows
 * {@code tensorrt_llm/serve/openai_disagg_service.py} of NVIDIA/TensorRT-LLM at commit
 * {@code 00bb903d965ffe9710a457d5848065d7d1b8f60a} (after #14177) and {@code openai_client.py} at
 * {@code 00cc02a328c9f42cf8a52b341d4fd9969b066a96} (MessagePack since #16873); {@link TrtLlmRelease}
 * turns off what older releases lack. Per chat request it calls the context worker through Envoy's
 * context listener and the generation worker through the generation listener, on the client's path:
 * <ul>
 *   <li>context-first ({@code _send_disagg_request_ctx_first}): the context call, its JSON response
 *       checked as {@code _verify_ctx_response} does, then the generation call built from it;</li>
 *   <li>generation-first ({@code _send_disagg_request_gen_first}): both bodies built up front; streaming,
 *       the generation POST goes out first and its stream is handed to the client only after the context
 *       response came back; not streaming, both POSTs at once and the generation response is returned.</li>
 * </ul>
 * The client gets the generation response: SSE chunks relayed as they arrive (FastAPI's
 * {@code StreamingResponse}, {@code text/event-stream; charset=utf-8}); JSON bytes as Envoy delivered
 * them, where the real server re-serialises the parsed pydantic model (same usage, more null fields).
 * A client's body is first validated as the real server's pydantic {@code ChatCompletionRequest}
 * ({@code extra="forbid"}): an unknown member or a {@code disaggregated_params} without {@code request_type}
 * is answered 400 and no worker is called ({@link TrtLlmRequests#validationError}); the client's
 * {@code disaggregated_params} is replaced on both worker requests and none of its headers is forwarded.
 * Not followed: {@code /v1/completions} and {@code /v1/responses} (the shared workers answer chat only),
 * conditional disaggregation, a context response that already finished the request, retries, perf-metrics
 * headers and events, and the disaggregation auth headers.
 */
final class TrtLlmOrchestrator implements AutoCloseable {
  static final String CHAT_COMPLETIONS = "/v1/chat/completions";

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String EVENT_STREAM = "text/event-stream; charset=utf-8";
  private static final HttpClient CLIENT =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(5)).build();

  private final EnvoyProcess envoy;
  private final TrtLlmRelease release;
  private final LongSupplier ids;
  private final LoopbackServer server;

  TrtLlmOrchestrator(EnvoyProcess envoy, TrtLlmRelease release) {
    this(envoy, release, new DisaggRequestIds(1)::next);
  }

  /** An orchestrator whose {@code disagg_request_id}s come from {@code ids} (a fixed one: colliding flows). */
  TrtLlmOrchestrator(EnvoyProcess envoy, TrtLlmRelease release, LongSupplier ids) {
    this.envoy = envoy;
    this.release = release;
    this.ids = ids;
    this.server = new LoopbackServer(this::handle);
  }

  /** The base URL an OpenAI client is given (the SDK appends {@code /v1}). */
  String baseUrl() {
    return server.baseUrl();
  }

  TrtLlmRelease release() {
    return release;
  }

  private void handle(HttpExchange exchange) throws IOException {
    try (exchange) {
      if (!CHAT_COMPLETIONS.equals(exchange.getRequestURI().getPath()) || !"POST".equals(exchange.getRequestMethod())) {
        reply(exchange, 404, "application/json", "{\"detail\":\"Not Found\"}");
        return;
      }
      // The orchestrator's app has no MessagePack route (only the workers' _MsgspecRoute reads
      // X-TRTLLM-Msgpack): a client's body is JSON whatever its headers say.
      ObjectNode client = (ObjectNode) JSON.readTree(exchange.getRequestBody());
      Optional<String> invalid = TrtLlmRequests.validationError(client);
      if (invalid.isPresent()) {
        reply(exchange, 400, "application/json", JSON.createObjectNode().put("error", invalid.get()).toString());
        return;
      }
      long id = ids.getAsLong();
      if (release.style() == ScheduleStyle.CONTEXT_FIRST) {
        contextFirst(exchange, client, id);
      } else {
        generationFirst(exchange, client, id);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (WorkerFailure e) {
      reply(exchange, 500, "application/json", JSON.createObjectNode().put("detail", "Internal server error: " + e.getMessage()).toString());
    }
  }

  private void contextFirst(HttpExchange exchange, ObjectNode client, long id) throws IOException, InterruptedException, WorkerFailure {
    ObjectNode context = TrtLlmRequests.context(client, id, ScheduleStyle.CONTEXT_FIRST);
    JsonNode contextResponse = contextResponse(CLIENT.send(post(envoy.contextUrl(CHAT_COMPLETIONS), context), HttpResponse.BodyHandlers.ofByteArray()));
    Optional<String> problem = TrtLlmRequests.contextResponseProblem(contextResponse);
    if (problem.isPresent()) {
      throw new WorkerFailure(problem.get());
    }
    HttpRequest generation = post(envoy.generationUrl(CHAT_COMPLETIONS), TrtLlmRequests.generationAfter(client, contextResponse, id, release));
    if (streams(client)) {
      relayStream(exchange, CLIENT.send(generation, HttpResponse.BodyHandlers.ofInputStream()));
    } else {
      relayJson(exchange, CLIENT.send(generation, HttpResponse.BodyHandlers.ofByteArray()));
    }
  }

  private void generationFirst(HttpExchange exchange, ObjectNode client, long id) throws IOException, InterruptedException, WorkerFailure {
    HttpRequest context = post(envoy.contextUrl(CHAT_COMPLETIONS), TrtLlmRequests.context(client, id, ScheduleStyle.GENERATION_FIRST));
    HttpRequest generation = post(envoy.generationUrl(CHAT_COMPLETIONS), TrtLlmRequests.generationFirst(client, id));
    if (streams(client)) {
      // The context worker waits for the generation worker's receive session, so the generation POST
      // must already be out; its chunks queue until the context response is in.
      CompletableFuture<HttpResponse<InputStream>> stream = CLIENT.sendAsync(generation, HttpResponse.BodyHandlers.ofInputStream());
      try {
        contextResponse(CLIENT.send(context, HttpResponse.BodyHandlers.ofByteArray()));
      } catch (WorkerFailure | IOException e) {
        stream.cancel(true);
        throw e;
      }
      relayStream(exchange, await(stream));
    } else {
      // asyncio.gather(ctx, gen): both at once, and responses[-1], the generation one, is returned
      BodyHandler<byte[]> bytes = HttpResponse.BodyHandlers.ofByteArray();
      CompletableFuture<HttpResponse<byte[]>> contextCall = CLIENT.sendAsync(context, bytes);
      CompletableFuture<HttpResponse<byte[]>> generationCall = CLIENT.sendAsync(generation, bytes);
      contextResponse(await(contextCall));
      relayJson(exchange, await(generationCall));
    }
  }

  private static boolean streams(JsonNode client) {
    return client.path("stream").asBoolean(false);
  }

  /** The context worker's JSON response; an error status or another type fails as aiohttp's client does. */
  private static JsonNode contextResponse(HttpResponse<byte[]> response) throws WorkerFailure {
    if (response.statusCode() >= 400) {
      throw new WorkerFailure("context worker answered " + response.statusCode() + ": " + new String(response.body(), StandardCharsets.UTF_8));
    }
    if (response.headers().firstValue("content-type").orElse("").contains("text/event-stream")) {
      throw new WorkerFailure("Received an event-stream although request stream was False");
    }
    try {
      return JSON.readTree(response.body());
    } catch (IOException e) {
      throw new WorkerFailure("context response is not JSON: " + e.getMessage());
    }
  }

  private static <T> HttpResponse<T> await(CompletableFuture<HttpResponse<T>> call) throws IOException, InterruptedException {
    try {
      return call.get();
    } catch (java.util.concurrent.ExecutionException e) {
      throw e.getCause() instanceof IOException io ? io : new IOException(e.getCause());
    }
  }

  /**
   * A worker POST as {@code OpenAIHttpClient._post_with_retry} sends it: aiohttp's default headers, the
   * transport's, no request id and none of the client's headers (the real one adds only headers it builds
   * itself: perf metrics, sub-agent affinity, internal auth).
   */
  private HttpRequest post(String url, ObjectNode body) {
    HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(30));
    request.header("accept", "*/*").header("accept-encoding", "gzip, deflate");
    release.transport().headers.forEach(request::header);
    return request.POST(HttpRequest.BodyPublishers.ofByteArray(release.transport().encode(body))).build();
  }

  private static void relayJson(HttpExchange exchange, HttpResponse<byte[]> generation) throws IOException, WorkerFailure {
    if (generation.statusCode() >= 400) {
      throw new WorkerFailure("generation worker answered " + generation.statusCode());
    }
    exchange.getResponseHeaders().set("content-type", "application/json");
    exchange.sendResponseHeaders(200, generation.body().length);
    try (OutputStream out = exchange.getResponseBody()) {
      out.write(generation.body());
    }
  }

  /** {@code _response_generator} without perf metrics: every chunk read is written and flushed at once. */
  private static void relayStream(HttpExchange exchange, HttpResponse<InputStream> generation) throws IOException, WorkerFailure {
    if (generation.statusCode() >= 400 || !generation.headers().firstValue("content-type").orElse("").contains("text/event-stream")) {
      generation.body().close();
      throw new WorkerFailure("generation worker answered " + generation.statusCode() + " without an event stream");
    }
    exchange.getResponseHeaders().set("content-type", EVENT_STREAM);
    exchange.sendResponseHeaders(200, 0);
    try (InputStream in = generation.body(); OutputStream out = exchange.getResponseBody()) {
      byte[] buffer = new byte[8192];
      for (int n; (n = in.read(buffer)) > 0; ) {
        out.write(buffer, 0, n);
        out.flush();
      }
    }
  }

  private static void reply(HttpExchange exchange, int status, String type, String body) throws IOException {
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    exchange.getResponseHeaders().set("content-type", type);
    exchange.sendResponseHeaders(status, bytes.length);
    try (OutputStream out = exchange.getResponseBody()) {
      out.write(bytes);
    }
  }

  /** A worker call the real orchestrator raises on; its server answers 500. */
  private static final class WorkerFailure extends Exception {
    WorkerFailure(String message) {
      super(message);
    }
  }

  @Override
  public void close() {
    server.close();
  }
}
