package io.disaggusage.e2e;

import com.sun.net.httpserver.HttpExchange;
import io.disaggusage.extproc.testkit.LoopbackServer;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * An HTTP/1.1 hop between Envoy and a real worker that records every exchange as the worker sent and
 * answered it: the truth a test compares the client's bytes with (Envoy and the service change the
 * answer after this hop). Requests and answers are relayed as they arrive; a JSON answer keeps its
 * {@code content-length}, a stream is relayed chunk by chunk as the worker flushes it.
 */
final class RecordingHop implements AutoCloseable {
  /** One exchange: the request the worker received and its raw answer. */
  record Exchange(String path, String requestId, byte[] request, int status, String contentType, byte[] response) {
    String requestText() {
      return new String(request, StandardCharsets.UTF_8);
    }

    String responseText() {
      return new String(response, StandardCharsets.UTF_8);
    }
  }

  /** Headers the JDK client sets itself or that belong to one connection. */
  private static final Set<String> NOT_RELAYED =
      Set.of("connection", "content-length", "expect", "host", "upgrade", "transfer-encoding", "keep-alive", "date");

  private final String target;
  private final HttpClient client = Orchestrator.newClient();
  private final LoopbackServer server;
  private final List<Exchange> exchanges = Collections.synchronizedList(new ArrayList<>());

  /** A hop in front of {@code target} ({@code http://host:port}). */
  RecordingHop(String target) {
    this.target = target;
    this.server = new LoopbackServer(this::relay);
  }

  int port() {
    return URI.create(server.baseUrl()).getPort();
  }

  /**
   * The one exchange on {@code path} with {@code requestId}, waiting a little for it: the hop records an
   * exchange once it has relayed the last byte, which the client may have read a moment before.
   */
  Exchange only(String path, String requestId) {
    return one(path + " exchange with x-request-id " + requestId, e -> e.path().equals(path) && requestId.equals(e.requestId()));
  }

  /** The one exchange on {@code path} whose answer's first {@code "id"} is {@code responseId} (JSON or SSE). */
  Exchange withResponseId(String path, String responseId) {
    String member = "\"id\":\"" + responseId + "\"";
    return one(path + " exchange answered with id " + responseId, e -> e.path().equals(path) && e.responseText().contains(member));
  }

  /**
   * The last exchange on {@code path}, once more than {@code before} exchanges on it are recorded: the
   * one a client has just had its answer from, which the hop records a moment after relaying its last
   * byte.
   */
  Exchange lastAfter(String path, int before) {
    Processes.await("a new " + path + " exchange recorded at " + target, Duration.ofSeconds(5), () -> count(path) > before);
    List<Exchange> found = all().stream().filter(e -> e.path().equals(path)).toList();
    return found.get(found.size() - 1);
  }

  /** How many exchanges on {@code path} are recorded so far. */
  int count(String path) {
    return (int) all().stream().filter(e -> e.path().equals(path)).count();
  }

  private Exchange one(String what, java.util.function.Predicate<Exchange> which) {
    Processes.await(what + " recorded at " + target, Duration.ofSeconds(5), () -> all().stream().anyMatch(which));
    List<Exchange> found = all().stream().filter(which).toList();
    if (found.size() != 1) {
      throw new AssertionError("expected one " + what + " at " + target + ", recorded " + found.size());
    }
    return found.get(0);
  }

  /** Every exchange recorded so far. */
  List<Exchange> all() {
    synchronized (exchanges) {
      return List.copyOf(exchanges);
    }
  }

  private void relay(HttpExchange exchange) throws IOException {
    try (exchange) {
      byte[] request = exchange.getRequestBody().readAllBytes();
      String path = exchange.getRequestURI().toString();
      HttpRequest.Builder forward = HttpRequest.newBuilder(URI.create(target + path))
          .timeout(Duration.ofSeconds(60))
          .method(exchange.getRequestMethod(), request.length == 0 && "GET".equals(exchange.getRequestMethod())
              ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofByteArray(request));
      exchange.getRequestHeaders().forEach((name, values) -> {
        if (!NOT_RELAYED.contains(name.toLowerCase(Locale.ROOT))) {
          values.forEach(value -> forward.header(name, value));
        }
      });
      HttpResponse<InputStream> answer = client.send(forward.build(), HttpResponse.BodyHandlers.ofInputStream());
      answer.headers().map().forEach((name, values) -> {
        if (!NOT_RELAYED.contains(name.toLowerCase(Locale.ROOT)) && !name.startsWith(":")) {
          exchange.getResponseHeaders().put(name, values);
        }
      });
      ByteArrayOutputStream recorded = new ByteArrayOutputStream();
      try (InputStream in = answer.body()) {
        if (answer.headers().firstValue("content-length").isPresent()) {
          byte[] body = in.readAllBytes();
          recorded.write(body);
          exchange.sendResponseHeaders(answer.statusCode(), body.length == 0 ? -1 : body.length);
          exchange.getResponseBody().write(body);
        } else {
          exchange.sendResponseHeaders(answer.statusCode(), 0);
          OutputStream out = exchange.getResponseBody();
          byte[] buffer = new byte[8192];
          for (int n; (n = in.read(buffer)) > 0; ) {
            recorded.write(buffer, 0, n);
            out.write(buffer, 0, n);
            out.flush();
          }
        }
      }
      exchanges.add(new Exchange(exchange.getRequestURI().getPath(), exchange.getRequestHeaders().getFirst("x-request-id"),
          request, answer.statusCode(), answer.headers().firstValue("content-type").orElse(""), recorded.toByteArray()));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public void close() {
    server.close();
  }
}
