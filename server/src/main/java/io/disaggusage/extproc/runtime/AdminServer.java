package io.disaggusage.extproc.runtime;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.prometheus.metrics.expositionformats.ExpositionFormatWriter;
import io.prometheus.metrics.expositionformats.ExpositionFormats;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The HTTP admin listener: {@code /healthz} (liveness), {@code /readyz} (readiness) and {@code /metrics}
 * (Prometheus text, or OpenMetrics / protobuf when the scraper's Accept header asks for it). Runs on the
 * JDK's built-in HTTP server with two daemon worker threads.
 */
final class AdminServer implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(AdminServer.class);
  private static final int WORKERS = 2;

  private final HttpServer server;
  private final ExecutorService workers;

  private AdminServer(HttpServer server, ExecutorService workers) {
    this.server = server;
    this.workers = workers;
  }

  /**
   * Binds and starts the listener.
   *
   * @param port TCP port, 0 for any free port
   * @param registry what {@code /metrics} exposes
   * @param notReadyReason empty when ready, otherwise why not (shown in the {@code /readyz} 503 body)
   */
  static AdminServer start(
      int port, PrometheusRegistry registry, Supplier<Optional<String>> notReadyReason)
      throws IOException {
    HttpServer server = HttpServer.create(new InetSocketAddress(port), 16);
    ExpositionFormats formats = ExpositionFormats.init();
    server.createContext("/healthz", exchange -> handle(exchange, "/healthz", () -> text(200, "ok\n")));
    server.createContext(
        "/readyz",
        exchange ->
            handle(
                exchange,
                "/readyz",
                () ->
                    notReadyReason
                        .get()
                        .map(reason -> text(503, "not ready: " + reason + "\n"))
                        .orElseGet(() -> text(200, "ready\n"))));
    server.createContext(
        "/metrics",
        exchange ->
            handle(
                exchange,
                "/metrics",
                () -> metrics(formats, registry, exchange.getRequestHeaders().getFirst("Accept"))));
    server.createContext("/", exchange -> handle(exchange, "/", () -> text(404, "not found; try /healthz, /readyz or /metrics\n")));
    ExecutorService workers = Executors.newFixedThreadPool(WORKERS, DaemonThreads.numbered("disagg-usage-admin-"));
    server.setExecutor(workers);
    server.start();
    return new AdminServer(server, workers);
  }

  int port() {
    return server.getAddress().getPort();
  }

  @Override
  public void close() {
    server.stop(0);
    workers.shutdown();
    try {
      if (!workers.awaitTermination(1, TimeUnit.SECONDS)) {
        workers.shutdownNow();
      }
    } catch (InterruptedException e) {
      workers.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }

  private record Response(int status, String contentType, byte[] body) {}

  private static Response text(int status, String body) {
    return new Response(status, "text/plain; charset=utf-8", body.getBytes(StandardCharsets.UTF_8));
  }

  private static Response metrics(ExpositionFormats formats, PrometheusRegistry registry, String accept)
      throws IOException {
    ExpositionFormatWriter writer = formats.findWriter(accept);
    ByteArrayOutputStream body = new ByteArrayOutputStream(16 * 1024);
    writer.write(body, registry.scrape());
    return new Response(200, writer.getContentType(), body.toByteArray());
  }

  private interface Handler {
    Response respond() throws IOException;
  }

  private static void handle(HttpExchange exchange, String path, Handler handler) {
    try (exchange) {
      String method = exchange.getRequestMethod();
      Response response;
      if (!exchange.getRequestURI().getPath().equals(path)) {
        response = text(404, "not found; try /healthz, /readyz or /metrics\n");
      } else if (!method.equals("GET") && !method.equals("HEAD")) {
        exchange.getResponseHeaders().set("Allow", "GET, HEAD");
        response = text(405, "method not allowed\n");
      } else {
        try {
          response = handler.respond();
        } catch (IOException | RuntimeException e) {
          log.warn("admin request {} {} failed: {}", method, path, e.toString());
          response = text(500, "internal error\n");
        }
      }
      exchange.getResponseHeaders().set("Content-Type", response.contentType());
      exchange.getResponseHeaders().set("Cache-Control", "no-store");
      if (method.equals("HEAD")) {
        exchange.sendResponseHeaders(response.status(), -1);
      } else {
        exchange.sendResponseHeaders(response.status(), response.body().length);
        try (OutputStream out = exchange.getResponseBody()) {
          out.write(response.body());
        }
      }
    } catch (IOException | RuntimeException e) {
      log.debug("admin response {} {} not sent: {}", exchange.getRequestMethod(), path, e.toString());
    }
  }
}
