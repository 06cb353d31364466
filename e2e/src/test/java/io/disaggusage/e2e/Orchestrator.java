package io.disaggusage.e2e;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * The orchestrator's side of the worker hop: posts a leg's exact request bytes and headers to an Envoy
 * listener and returns what Envoy forwarded back, as an orchestrator (trtllm-serve disaggregated, a vLLM
 * P/D proxy, an SGLang router) would read it.
 */
final class Orchestrator {
  /** A worker call's answer as the orchestrator receives it through Envoy. */
  record Answer(int status, String contentType, byte[] body) {
    String text() {
      return new String(body, java.nio.charset.StandardCharsets.UTF_8);
    }
  }

  private static final HttpClient CLIENT =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(5)).build();

  private Orchestrator() {}

  static CompletableFuture<Answer> post(String url, Map<String, String> headers, byte[] body) {
    return post(CLIENT, url, headers, body);
  }

  /** {@link #post(String, Map, byte[])} on {@code client}'s connections (a caller that must not reuse the suite's). */
  static CompletableFuture<Answer> post(HttpClient client, String url, Map<String, String> headers, byte[] body) {
    HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(url))
        .timeout(Duration.ofSeconds(30))
        .header("content-type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofByteArray(body));
    headers.forEach(request::setHeader);
    return client.sendAsync(request.build(), HttpResponse.BodyHandlers.ofByteArray())
        .thenApply(r -> new Answer(r.statusCode(), r.headers().firstValue("content-type").orElse(""), r.body()));
  }

  static Answer postAndWait(String url, Map<String, String> headers, byte[] body) {
    try {
      return post(url, headers, body).get();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    } catch (java.util.concurrent.ExecutionException e) {
      throw new AssertionError("POST " + url + " failed: " + e.getCause(), e.getCause());
    }
  }

}
