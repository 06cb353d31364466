package io.disaggusage.extproc.tools.sandbox;

import com.sun.net.httpserver.HttpExchange;
import io.disaggusage.extproc.emulator.engines.BadRequest;
import io.disaggusage.extproc.emulator.engines.ClientRequest;
import io.disaggusage.extproc.emulator.engines.DisaggEngine;
import io.disaggusage.extproc.emulator.engines.ScheduleOrder;
import io.disaggusage.extproc.emulator.engines.WorkerCall;
import io.disaggusage.extproc.emulator.engines.WorkerReply;
import io.disaggusage.extproc.emulator.workers.ReplyWriter;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

/**
 * A family's orchestrator over HTTP (what {@code trtllm-serve disaggregated} or a vLLM P/D proxy does):
 * takes a client's chat completion, sends the family's context call to the context worker and then its
 * generation call, built from the context reply, to the generation worker, both through Envoy
 * listeners, and relays the generation response to the client as it arrives. Context-first, the order
 * both families' orchestrators use by default.
 */
final class Orchestrator implements LoopbackHttp.PostHandler {
  /** {@code max_tokens} when the client sends none: enough for the simulated model's whole answer. */
  static final int DEFAULT_MAX_TOKENS = 64;

  private static final Duration CALL_TIMEOUT = Duration.ofSeconds(60);

  private final DisaggEngine engine;
  private final URI contextWorkers;
  private final URI generationWorkers;
  private final HttpClient client;

  /**
   * @param contextWorkers the Envoy listener for context calls, e.g. {@code http://127.0.0.1:18010}
   * @param generationWorkers the Envoy listener for generation calls
   */
  Orchestrator(DisaggEngine engine, URI contextWorkers, URI generationWorkers, HttpClient client) {
    this.engine = engine;
    this.contextWorkers = contextWorkers;
    this.generationWorkers = generationWorkers;
    this.client = client;
  }

  @Override
  public void post(HttpExchange exchange, byte[] body) throws IOException {
    ClientRequest request;
    try {
      request = ClientRequest.fromJson(body, SeedRequest.MODEL, DEFAULT_MAX_TOKENS);
    } catch (BadRequest e) {
      ReplyWriter.send(exchange, e.reply(), Duration.ZERO);
      return;
    }
    try {
      serve(exchange, request);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private void serve(HttpExchange exchange, ClientRequest request) throws IOException, InterruptedException {
    WorkerCall contextCall = engine.contextCall(request, ScheduleOrder.CONTEXT_FIRST);
    HttpResponse<byte[]> context;
    try {
      context = client.send(post(contextWorkers, contextCall), HttpResponse.BodyHandlers.ofByteArray());
    } catch (IOException e) {
      LoopbackHttp.sendError(exchange, 502, "orchestrator: the context call failed: " + e);
      return;
    }
    WorkerReply contextReply = WorkerReply.received(context.statusCode(), contentType(context), context.body());
    if (context.statusCode() != 200) {
      // as the orchestrators do: a failed context call is the client's answer
      ReplyWriter.send(exchange, contextReply, Duration.ZERO);
      return;
    }
    WorkerCall generationCall = engine.generationCall(request, ScheduleOrder.CONTEXT_FIRST, contextCall, contextReply);
    HttpResponse<InputStream> generation;
    try {
      generation = client.send(post(generationWorkers, generationCall), HttpResponse.BodyHandlers.ofInputStream());
    } catch (IOException e) {
      LoopbackHttp.sendError(exchange, 502, "orchestrator: the generation call failed: " + e);
      return;
    }
    relay(generation, exchange);
  }

  /** Copies the generation response to the client as its bytes arrive (each read flushed as a chunk). */
  private static void relay(HttpResponse<InputStream> generation, HttpExchange exchange) throws IOException {
    exchange.getResponseHeaders().set("content-type", contentType(generation));
    exchange.sendResponseHeaders(generation.statusCode(), 0);
    try (InputStream in = generation.body();
        OutputStream out = exchange.getResponseBody()) {
      byte[] buffer = new byte[16 * 1024];
      int n;
      while ((n = in.read(buffer)) >= 0) {
        out.write(buffer, 0, n);
        out.flush();
      }
    }
  }

  private static HttpRequest post(URI listener, WorkerCall call) {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(listener.resolve(call.path()))
            .timeout(CALL_TIMEOUT)
            .POST(HttpRequest.BodyPublishers.ofByteArray(call.body()));
    call.headers().forEach(request::header);
    return request.build();
  }

  private static String contentType(HttpResponse<?> response) {
    return response.headers().firstValue("content-type").orElse("application/octet-stream");
  }
}
