package io.disaggusage.extproc.tools.replay;

import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.HeaderList;
import java.time.Duration;
import java.util.Map;

/**
 * One captured exchange between the orchestrator and a worker: the request and the response, each as
 * headers (pseudo-headers included) and raw body bytes, and the Envoy cluster it was routed to.
 *
 * @param cluster {@code xds.cluster_name} as Envoy would report it, null when not known
 */
public record ReplayLeg(
    HeaderList requestHeaders, byte[] requestBody, HeaderList responseHeaders, byte[] responseBody, String cluster) {

  /** What a missing request pseudo-header is taken to be. */
  static final Map<String, String> REQUEST_DEFAULTS =
      Map.of(":method", "POST", ":path", "/v1/chat/completions", ":authority", "workers", ":scheme", "http");

  public ReplayLeg {
    requestHeaders = requestHeaders.copy();
    requestBody = requestBody.clone();
    responseHeaders = responseHeaders.copy();
    responseBody = responseBody.clone();
  }

  /**
   * Headers for a body captured without them: a JSON POST to {@code /v1/chat/completions} with a
   * content-length; a 200 response with a content-length if the body is JSON, or chunked
   * {@code text/event-stream} if it is an event stream.
   */
  public static ReplayLeg withDefaultHeaders(
      HeaderList requestHeaders, byte[] requestBody, HeaderList responseHeaders, byte[] responseBody, String cluster) {
    HeaderList request = requestHeaders != null ? requestHeaders : defaultRequestHeaders(requestBody);
    HeaderList response = responseHeaders != null ? responseHeaders : defaultResponseHeaders(responseBody);
    return new ReplayLeg(request, requestBody, response, responseBody, cluster);
  }

  private static HeaderList defaultRequestHeaders(byte[] body) {
    return new HeaderList()
        .add("content-type", "application/json")
        .add("content-length", Integer.toString(body.length));
  }

  private static HeaderList defaultResponseHeaders(byte[] body) {
    HeaderList headers = new HeaderList().add(":status", "200");
    if (looksLikeEventStream(body)) {
      return headers.add("content-type", "text/event-stream");
    }
    return headers.add("content-type", "application/json").add("content-length", Integer.toString(body.length));
  }

  /** Starts with an SSE field ({@code data:}, {@code event:}, {@code id:}, {@code retry:}) or a comment. */
  static boolean looksLikeEventStream(byte[] body) {
    String start = new String(body, 0, Math.min(body.length, 16), java.nio.charset.StandardCharsets.ISO_8859_1).stripLeading();
    return start.startsWith("data:") || start.startsWith("event:") || start.startsWith("id:")
        || start.startsWith("retry:") || start.startsWith(":");
  }

  /** The response status ({@code :status}, 200 when absent). */
  public int status() {
    return Integer.parseInt(responseHeaders.get(":status").orElse("200"));
  }

  /** Whether the response is a server-sent event stream. */
  public boolean eventStream() {
    return responseHeaders.get("content-type").map(t -> t.trim().startsWith("text/event-stream")).orElse(false);
  }

  /**
   * The leg as an exchange through the fake Envoy.
   *
   * @param responseChunking how the response body reaches Envoy
   * @param chunkDelay pause before each response chunk
   */
  public Exchange.Builder exchange(String name, Chunking responseChunking, Duration chunkDelay) {
    Exchange.Builder b =
        Exchange.builder()
            .name(name)
            .method(pseudo(":method"))
            .path(pseudo(":path"))
            .authority(pseudo(":authority"))
            .scheme(pseudo(":scheme"));
    for (Map.Entry<String, String> h : requestHeaders.entries()) {
      if (!h.getKey().startsWith(":")) {
        b.requestHeader(h.getKey(), h.getValue());
      }
    }
    b.requestBody(requestBody).responseStatus(status());
    for (Map.Entry<String, String> h : responseHeaders.entries()) {
      if (!h.getKey().startsWith(":")) {
        b.responseHeader(h.getKey(), h.getValue());
      }
    }
    b.responseBody(responseBody).responseChunking(responseChunking).responseChunkDelay(chunkDelay);
    if (cluster != null) {
      b.requestAttribute("xds.cluster_name", cluster);
    }
    return b;
  }

  private String pseudo(String name) {
    return requestHeaders.get(name).orElse(REQUEST_DEFAULTS.get(name));
  }

  /** The same leg routed to {@code cluster}. */
  public ReplayLeg withCluster(String cluster) {
    return new ReplayLeg(requestHeaders, requestBody, responseHeaders, responseBody, cluster);
  }
}
