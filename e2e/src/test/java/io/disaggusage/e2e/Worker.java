package io.disaggusage.e2e;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.Function;

/**
 * An HTTP/1.1 worker pool of one: it records every request it receives and answers with the reply a
 * test scripts — an engine's exact bytes, written in paced chunks with {@code Transfer-Encoding: chunked}
 * the way engines stream, optionally after a delay (a slow context worker).
 */
final class Worker implements AutoCloseable {
  /** A request as the worker received it (header names lower-cased). */
  record Received(String method, String path, Map<String, String> headers, byte[] body) {
    String header(String name) {
      return headers.get(name.toLowerCase(Locale.ROOT));
    }
  }

  /**
   * What the worker answers.
   *
   * @param chunks the body's pieces, each written and flushed on its own
   * @param pause the time between two pieces
   * @param delay the time before the status line
   * @param linger the time between the last piece and the end of the body (an engine that writes
   *     {@code [DONE]} and ends its response a moment later)
   * @param contentLength announce the body's length (as uvicorn does for a JSON response) instead of
   *     {@code Transfer-Encoding: chunked} (as for a stream)
   */
  record Reply(int status, String contentType, List<byte[]> chunks, Duration pause, Duration delay, boolean contentLength,
      Duration linger) {
    Reply(int status, String contentType, List<byte[]> chunks, Duration pause, Duration delay) {
      this(status, contentType, chunks, pause, delay, !contentType.startsWith("text/event-stream"), Duration.ZERO);
    }

    /**
     * {@code body} in {@code pieces} near-equal chunks, {@code pause} apart; JSON with a content-length,
     * SSE chunked, as engines' HTTP servers send them.
     */
    static Reply paced(String contentType, byte[] body, int pieces, Duration pause) {
      List<byte[]> chunks = new ArrayList<>();
      int size = Math.max(1, (body.length + pieces - 1) / pieces);
      for (int at = 0; at < body.length; at += size) {
        chunks.add(java.util.Arrays.copyOfRange(body, at, Math.min(body.length, at + size)));
      }
      return new Reply(200, contentType, chunks, pause, Duration.ZERO);
    }

    Reply delayedBy(Duration delay) {
      return new Reply(status, contentType, chunks, pause, delay, contentLength, linger);
    }

    Reply lingering(Duration linger) {
      return new Reply(status, contentType, chunks, pause, delay, contentLength, linger);
    }

    long length() {
      return chunks.stream().mapToLong(c -> c.length).sum();
    }
  }

  private final String name;
  private final HttpServer server;
  private final ExecutorService executor = Executors.newCachedThreadPool();
  private final List<Received> received = Collections.synchronizedList(new ArrayList<>());
  private volatile Function<Received, Reply> responder;

  Worker(String name) {
    this(name, InetAddress.getLoopbackAddress());
  }

  /** A worker listening on {@code address} (a "pod address" such as 127.0.0.2: Linux routes 127/8 to lo). */
  Worker(String name, InetAddress address) {
    this.name = name;
    try {
      server = HttpServer.create(new InetSocketAddress(address, 0), 256);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    server.setExecutor(executor);
    server.createContext("/", this::handle);
    server.start();
  }

  int port() {
    return server.getAddress().getPort();
  }

  /** Sets how the worker answers from now on. */
  void answer(Function<Received, Reply> responder) {
    this.responder = responder;
  }

  /** The requests received so far, oldest first. */
  List<Received> received() {
    synchronized (received) {
      return List.copyOf(received);
    }
  }

  void clear() {
    received.clear();
  }

  private void handle(HttpExchange exchange) throws IOException {
    try (exchange) {
      Map<String, String> headers = new TreeMap<>();
      exchange.getRequestHeaders().forEach((k, v) -> headers.put(k.toLowerCase(Locale.ROOT), String.join(",", v)));
      Received request = new Received(
          exchange.getRequestMethod(), exchange.getRequestURI().toString(), Map.copyOf(headers),
          exchange.getRequestBody().readAllBytes());
      received.add(request);
      Function<Received, Reply> current = responder;
      if (current == null) {
        exchange.sendResponseHeaders(503, -1);
        return;
      }
      Reply reply = current.apply(request);
      Processes.sleepMillis(reply.delay().toMillis());
      exchange.getResponseHeaders().set("content-type", reply.contentType());
      exchange.sendResponseHeaders(reply.status(), reply.contentLength() ? (reply.length() == 0 ? -1 : reply.length()) : 0);
      OutputStream out = exchange.getResponseBody();
      for (int i = 0; i < reply.chunks().size(); i++) {
        if (i > 0) {
          Processes.sleepMillis(reply.pause().toMillis());
        }
        out.write(reply.chunks().get(i));
        out.flush();
      }
      Processes.sleepMillis(reply.linger().toMillis());
    } catch (IOException | RuntimeException e) {
      // the downstream (Envoy) went away mid-reply: a fault test's doing
    }
  }

  @Override
  public void close() {
    server.stop(0);
    executor.shutdownNow();
  }

  @Override
  public String toString() {
    return name + ":" + port();
  }
}
