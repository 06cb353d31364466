package io.disaggusage.extproc.testkit;

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
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.function.UnaryOperator;

/**
 * A vLLM P/D proxy in front of an Envoy (or any hop to the two workers): what a client (curl, an SDK) talks to. For each request it calls
 * the prefill worker through Envoy's context listener (the request plus {@code kv_transfer_params
 * {do_remote_decode: true, do_remote_prefill: false, remote_engine_id: null, remote_block_ids: null,
 * remote_host: null, remote_port: null}}, {@code max_tokens: 1}, {@code max_completion_tokens: 1} when the
 * client sent it, {@code stream: false}, no {@code stream_options}), then the decode worker through the
 * generation listener (the request plus the prefill's {@code kv_transfer_params}, verbatim unless the proxy
 * was given a {@code handoff} that rewrites them), both with one fresh {@code X-Request-Id}, and streams
 * the decode answer back chunk by chunk, as vLLM's {@code toy_proxy_server.py}
 * ({@code tests/v1/kv_connector/nixl_integration}) and {@code disagg_proxy_p2p_nccl_xpyd.py} do.
 */
public class ToyProxy implements AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();

  /**
   * Connections of this proxy's own, as each proxy process has: a test that changed a proxy's listener starts a new
   * proxy, none of whose requests then lands on a connection the previous listener still drains.
   */
  private final HttpClient client =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(5)).build();
  private final UnaryOperator<String> prefillUrl;
  private final UnaryOperator<String> decodeUrl;
  /** Headers each leg carries besides the proxy's own: what a gateway's route matches, a Host naming a Service. */
  private final Map<String, String> prefillHeaders;
  private final Map<String, String> decodeHeaders;
  private final UnaryOperator<ObjectNode> handoff;
  /** Each leg gets an id of its own (the decode's {@link #decodeRequestId}), as Envoy gives them behind SMG. */
  private final boolean oneIdPerLeg;
  private final List<String> requestIds = Collections.synchronizedList(new ArrayList<>());
  private final LoopbackServer server;

  /** The toy proxy as vLLM ships it: the prefill leg at {@code prefillUrl(path)}, the decode leg at {@code decodeUrl(path)}. */
  public ToyProxy(UnaryOperator<String> prefillUrl, UnaryOperator<String> decodeUrl) {
    this(prefillUrl, Map.of(), decodeUrl, Map.of(), UnaryOperator.identity(), false);
  }

  /**
   * The toy proxy calling the prefill worker at {@code prefillUrl(path)} with {@code prefillHeaders} and the
   * decode worker at {@code decodeUrl(path)} with {@code decodeHeaders}, the prefill's {@code kv_transfer_params}
   * passed through {@code handoff} on the way to the decode leg; with {@code oneIdPerLeg} the decode leg's
   * {@code X-Request-Id} is not the prefill's but {@link #decodeRequestId} of it: legs that share no id, as
   * behind a router that sends none (SMG) and an Envoy that then generates one per leg.
   */
  public ToyProxy(UnaryOperator<String> prefillUrl, Map<String, String> prefillHeaders,
      UnaryOperator<String> decodeUrl, Map<String, String> decodeHeaders,
      UnaryOperator<ObjectNode> handoff, boolean oneIdPerLeg) {
    this.prefillUrl = prefillUrl;
    this.prefillHeaders = Map.copyOf(prefillHeaders);
    this.decodeUrl = decodeUrl;
    this.decodeHeaders = Map.copyOf(decodeHeaders);
    this.handoff = handoff;
    this.oneIdPerLeg = oneIdPerLeg;
    this.server = new LoopbackServer(this::handle);
  }

  /** The {@code X-Request-Id} of each request so far, in the order the requests arrived. */
  public List<String> requestIds() {
    synchronized (requestIds) {
      return List.copyOf(requestIds);
    }
  }

  /** The {@code X-Request-Id} the decode leg of request {@code requestId} carried. */
  public String decodeRequestId(String requestId) {
    return oneIdPerLeg ? "decode-" + requestId : requestId;
  }

  /** The base URL an OpenAI or Anthropic client is given. */
  public String baseUrl() {
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

  private static HttpRequest post(String url, Map<String, String> headers, String requestId, JsonNode body)
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
