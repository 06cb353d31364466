package io.disaggusage.e2e;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

/** Small HTTP/1.1 GETs (and JSON POSTs) against admin ports; null when nothing answers. */
final class Http {
  static final HttpClient CLIENT =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(2)).build();

  private Http() {}

  static HttpResponse<String> get(String url) {
    return send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(5)).GET().build());
  }

  /** A POST of a JSON {@code body}; null when nothing answers. */
  static HttpResponse<String> postJson(String url, String body) {
    return send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(5))
        .header("content-type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build());
  }

  /** The answer as text; null when nothing answers. */
  private static HttpResponse<String> send(HttpRequest request) {
    try {
      return CLIENT.send(request, HttpResponse.BodyHandlers.ofString());
    } catch (IOException e) {
      return null;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  static boolean ok(String url) {
    return status(url) == 200;
  }

  /** The status of a GET; 0 when nothing answers. */
  static int status(String url) {
    HttpResponse<String> response = get(url);
    return response == null ? 0 : response.statusCode();
  }

  static String body(String url) {
    HttpResponse<String> response = get(url);
    if (response == null || response.statusCode() != 200) {
      throw new AssertionError("GET " + url + " failed: " + (response == null ? "no answer" : response.statusCode()));
    }
    return response.body();
  }
}
