package io.disaggusage.extproc.tools.sandbox;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.disaggusage.extproc.runtime.StartupException;
import java.io.IOException;
import java.io.OutputStream;
import java.net.BindException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executor;

/** The sandbox's orchestrators' HTTP servers: the JDK's server, on loopback only. */
final class LoopbackHttp {
  /** The path every orchestrator serves, as the engines' do. */
  static final String CHAT_COMPLETIONS = "/v1/chat/completions";

  private LoopbackHttp() {}

  /** What an orchestrator does with a POSTed chat completion. */
  @FunctionalInterface
  interface PostHandler {
    void post(HttpExchange exchange, byte[] body) throws IOException;
  }

  /**
   * A started server on loopback {@code port} (0: any free one) passing the POSTs to
   * {@link #CHAT_COMPLETIONS} to {@code handler} on {@code executor}; other methods get a 405.
   *
   * @param role what it is, for the message when the port is taken
   */
  static HttpServer start(String role, int port, PostHandler handler, Executor executor) throws StartupException {
    try {
      HttpServer server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 64);
      server.createContext(CHAT_COMPLETIONS, exchange -> handlePost(exchange, handler));
      server.setExecutor(executor);
      server.start();
      return server;
    } catch (BindException e) {
      throw new StartupException(role + ": port " + port + " is in use; choose other ports with --port-base", e);
    } catch (IOException e) {
      throw new StartupException(role + ": cannot listen on port " + port + ": " + e.getMessage(), e);
    }
  }

  private static void handlePost(HttpExchange exchange, PostHandler handler) throws IOException {
    try (exchange) {
      if (!"POST".equals(exchange.getRequestMethod())) {
        sendError(exchange, 405, "POST a chat completion");
        return;
      }
      handler.post(exchange, exchange.getRequestBody().readAllBytes());
    }
  }

  /** A plain-text error answer (the sandbox's own failures, never a worker's). */
  static void sendError(HttpExchange exchange, int status, String message) throws IOException {
    byte[] body = (message + "\n").getBytes(StandardCharsets.UTF_8);
    exchange.getResponseHeaders().set("content-type", "text/plain; charset=utf-8");
    exchange.sendResponseHeaders(status, body.length);
    try (OutputStream out = exchange.getResponseBody()) {
      out.write(body);
    }
  }
}
