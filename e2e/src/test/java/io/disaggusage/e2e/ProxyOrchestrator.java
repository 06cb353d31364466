package io.disaggusage.e2e;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.UUID;

/**
 * A vLLM P/D proxy in front of an Envoy: what a client (curl, an SDK) talks to. For each request it calls
 * the prefill worker through Envoy's context listener (the request plus {@code kv_transfer_params
 * {do_remote_decode: true, do_remote_prefill: false, remote_engine_id: null, remote_block_ids: null,
 * remote_host: null, remote_port: null}}, {@code max_tokens: 1}, {@code max_completion_tokens: 1} when the
 * client sent it, {@code stream: false}, no {@code stream_options}), then the decode worker through the
 * generation listener (the request plus the prefill's {@code kv_transfer_params}, verbatim unless the proxy
 * was given a {@code handoff} that rewrites them), both with one fresh {@code X-Request-Id}, and streams
 * the decode answer back chunk by chunk, as vLLM's {@code toy_proxy_server.py}
 * ({@code tests/v1/kv_connector/nixl_integration}) and {@code disagg_proxy_p2p_nccl_xpyd.py} do.
 */
final class ProxyOrchestrator implements AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();

  /**
   * Connections of this proxy's own, as each proxy process has: a test that changed a proxy's listener starts a new
   * orchestrator, none of whose requests then lands on a connection the previous listener still drains.
   */
  private final HttpClient client = Orchestrator.newClient();
  private final java.util.function.UnaryOperator<String> prefillUrl;
  private final java.util.function.UnaryOperator<String> decodeUrl;
  /** Headers each leg carries besides the proxy's own: what a gateway's route matches, a Host naming a Service. */
  private final java.util.Map<String, String> prefillHeaders;
  private final java.util.Map<String, String> decodeHeaders;
  private final java.util.function.UnaryOperator<ObjectNode> handoff;
  /** Each leg gets an id of its own (the decode's {@link #decodeRequestId}), as Envoy gives them behind SMG. */
  private final boolean oneIdPerLeg;
  private final java.util.List<String> requestIds = java.util.Collections.synchronizedList(new java.util.ArrayList<>());
  private final LoopbackServer server;

  ProxyOrchestrator(EnvoyProcess envoy) {
    this(envoy, java.util.function.UnaryOperator.identity());
  }

  /** A proxy that passes the prefill's {@code kv_transfer_params} through {@code handoff} on the way to the decode leg. */
  ProxyOrchestrator(EnvoyProcess envoy, java.util.function.UnaryOperator<ObjectNode> handoff) {
    this(envoy::contextUrl, envoy::generationUrl, handoff);
  }

  /** A proxy calling the prefill worker at {@code prefillUrl(path)} and the decode worker at {@code decodeUrl(path)}. */
  ProxyOrchestrator(java.util.function.UnaryOperator<String> prefillUrl, java.util.function.UnaryOperator<String> decodeUrl,
      java.util.function.UnaryOperator<ObjectNode> handoff) {
    this(prefillUrl, decodeUrl, handoff, false);
  }

  /**
   * A proxy as above; with {@code oneIdPerLeg} the decode leg's {@code X-Request-Id} is not the prefill's
   * but {@link #decodeRequestId} of it: legs that share no id, as behind a router that sends none (SMG)
   * and an Envoy that then generates one per leg.
   */
  ProxyOrchestrator(java.util.function.UnaryOperator<String> prefillUrl, java.util.function.UnaryOperator<String> decodeUrl,
      java.util.function.UnaryOperator<ObjectNode> handoff, boolean oneIdPerLeg) {
    this(prefillUrl, java.util.Map.of(), decodeUrl, java.util.Map.of(), handoff, oneIdPerLeg);
  }

  /**
   * The toy proxy calling its workers through a hop that routes by headers (a Gateway's HTTPRoute, an Istio
   * proxy's Host-named virtual host): the prefill leg at {@code prefillUrl(path)} with {@code prefillHeaders},
   * the decode leg at {@code decodeUrl(path)} with {@code decodeHeaders}; the prefill's params relayed verbatim.
   */
  ProxyOrchestrator(java.util.function.UnaryOperator<String> prefillUrl, java.util.Map<String, String> prefillHeaders,
      java.util.function.UnaryOperator<String> decodeUrl, java.util.Map<String, String> decodeHeaders) {
    this(prefillUrl, prefillHeaders, decodeUrl, decodeHeaders, java.util.function.UnaryOperator.identity(), false);
  }

  private ProxyOrchestrator(java.util.function.UnaryOperator<String> prefillUrl, java.util.Map<String, String> prefillHeaders,
      java.util.function.UnaryOperator<String> decodeUrl, java.util.Map<String, String> decodeHeaders,
      java.util.function.UnaryOperator<ObjectNode> handoff, boolean oneIdPerLeg) {
    this.prefillUrl = prefillUrl;
    this.prefillHeaders = java.util.Map.copyOf(prefillHeaders);
    this.decodeUrl = decodeUrl;
    this.decodeHeaders = java.util.Map.copyOf(decodeHeaders);
    this.handoff = handoff;
    this.oneIdPerLeg = oneIdPerLeg;
    this.server = new LoopbackServer(this::handle);
  }

  /** The {@code X-Request-Id} of each request so far, in the order the requests arrived. */
  java.util.List<String> requestIds() {
    synchronized (requestIds) {
      return java.util.List.copyOf(requestIds);
    }
  }

  /** The {@code X-Request-Id} the decode leg of request {@code requestId} carried. */
  String decodeRequestId(String requestId) {
    return oneIdPerLeg ? "decode-" + requestId : requestId;
  }

  /** The base URL an OpenAI or Anthropic client is given. */
  String baseUrl() {
    return server.baseUrl();
  }

  private void handle(HttpExchange exchange) throws IOException {
    try (exchange) {
      String path = exchange.getRequestURI().getPath();
      ObjectNode request = (ObjectNode) JSON.readTree(exchange.getRequestBody());
      String requestId = UUID.randomUUID().toString();
      requestIds.add(requestId);

      ObjectNode prefill = request.deepCopy();
      prefill.putObject("kv_transfer_params").put("do_remote_decode", true).put("do_remote_prefill", false)
          .putNull("remote_engine_id").putNull("remote_block_ids").putNull("remote_host").putNull("remote_port");
      prefill.put("max_tokens", 1);
      if (prefill.has("max_completion_tokens")) {
        prefill.put("max_completion_tokens", 1);
      }
      prefill.put("stream", false);
      prefill.remove("stream_options");
      HttpResponse<byte[]> prefilled =
          client.send(post(prefillUrl.apply(path), prefillHeaders, requestId, prefill), HttpResponse.BodyHandlers.ofByteArray());
      if (prefilled.statusCode() != 200) {
        exchange.sendResponseHeaders(502, -1);
        return;
      }
      ObjectNode decode = request.deepCopy();
      JsonNode handoff = JSON.readTree(prefilled.body()).path("kv_transfer_params");
      decode.set("kv_transfer_params", this.handoff.apply(
          handoff.isObject() ? (ObjectNode) handoff : JSON.createObjectNode().put("do_remote_prefill", true)));

      HttpResponse<InputStream> decoded = client.send(
          post(decodeUrl.apply(path), decodeHeaders, decodeRequestId(requestId), decode), HttpResponse.BodyHandlers.ofInputStream());
      exchange.getResponseHeaders().set("content-type", decoded.headers().firstValue("content-type").orElse("application/json"));
      exchange.sendResponseHeaders(decoded.statusCode(), 0);
      try (InputStream in = decoded.body(); OutputStream out = exchange.getResponseBody()) {
        byte[] buffer = new byte[8192];
        for (int n; (n = in.read(buffer)) > 0; ) {
          out.write(buffer, 0, n);
          out.flush();
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static HttpRequest post(String url, java.util.Map<String, String> headers, String requestId, JsonNode body)
      throws IOException {
    HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(url))
        .timeout(Duration.ofSeconds(30))
        .header("content-type", "application/json")
        .header("x-request-id", requestId)
        .POST(HttpRequest.BodyPublishers.ofByteArray(JSON.writeValueAsBytes(body)));
    headers.forEach(request::setHeader);
    return request.build();
  }

  @Override
  public void close() {
    server.close();
  }
}
