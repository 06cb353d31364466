package io.disaggusage.extproc.testkit;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/** A GET to a child's loopback admin port: how a launcher learns that its child is ready. */
public final class LoopbackGet {
  private static final HttpClient CLIENT =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(1)).build();

  private LoopbackGet() {}

  /** The body of {@code GET http://127.0.0.1:port/path}, or null when nothing answers 200 within 2 s. */
  public static String body(int port, String path) {
    try {
      HttpResponse<String> response = CLIENT.send(
          HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path)).timeout(Duration.ofSeconds(2)).build(),
          HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
      return response.statusCode() == 200 ? response.body() : null;
    } catch (IOException e) {
      return null;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** Whether {@code GET http://127.0.0.1:port/path} answers 200. */
  public static boolean ok(int port, String path) {
    return body(port, path) != null;
  }
}
