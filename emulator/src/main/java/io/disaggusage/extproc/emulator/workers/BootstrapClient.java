package io.disaggusage.extproc.emulator.workers;

import com.fasterxml.jackson.databind.JsonNode;
import io.disaggusage.extproc.emulator.engines.OpenAiWire;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

/**
 * A SGLang decode worker's side of the KV handover: it asks the prefill's bootstrap listener at the
 * request's {@code bootstrap_host:bootstrap_port} for each room. It fails when the address is wrong or
 * the prefill never had the room, which is what makes a topology test prove {@code bootstrap_host}.
 */
final class BootstrapClient {
  private static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(2);

  private final HttpClient client =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(CONNECT_TIMEOUT).build();

  /** The handover failed; the message says why, for the decode's error answer. */
  static final class HandoverFailed extends Exception {
    HandoverFailed(String message) {
      super(message);
    }
  }

  PrefilledRoom fetch(String host, int port, long room) throws HandoverFailed {
    String authority = host.contains(":") ? "[" + host + "]:" + port : host + ":" + port;
    HttpResponse<byte[]> response;
    try {
      HttpRequest request =
          HttpRequest.newBuilder(URI.create("http://" + authority + BootstrapServer.ROUTE + "?bootstrap_room=" + room))
              .timeout(BootstrapServer.ROOM_WAIT.plus(CONNECT_TIMEOUT))
              .GET()
              .build();
      response = client.send(request, HttpResponse.BodyHandlers.ofByteArray());
    } catch (IOException | IllegalArgumentException e) {
      throw new HandoverFailed("KV transfer failed: cannot reach the bootstrap server at " + authority + ": " + e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new HandoverFailed("KV transfer interrupted");
    }
    if (response.statusCode() != 200) {
      throw new HandoverFailed("KV transfer failed: bootstrap server at " + authority + " has no room " + room);
    }
    try {
      JsonNode body = OpenAiWire.JSON.readTree(response.body());
      return new PrefilledRoom(body.path("prompt_tokens").asLong(), body.path("cached_tokens").asLong());
    } catch (IOException e) {
      throw new HandoverFailed("KV transfer failed: unreadable bootstrap answer from " + authority);
    }
  }
}
