package io.disaggusage.extproc.emulator.workers;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.emulator.engines.BadRequest;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.disaggusage.extproc.emulator.engines.OpenAiWire;
import io.disaggusage.extproc.emulator.engines.WorkerReply;
import io.disaggusage.extproc.emulator.engines.WorkerReply.TokenCounts;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A SGLang prefill worker's bootstrap listener, on the prefill's own bind address: the decode worker
 * asks it for a {@code bootstrap_room} and gets the prefilled room, or 404 when the prefill never
 * registered that room. SGLang's real bootstrap server is HTTP too ({@code /route}) but exchanges rank
 * addresses for a KV transfer engine; this one hands over only what the usage depends on.
 */
final class BootstrapServer implements AutoCloseable {
  static final String ROUTE = "/route";

  /**
   * How long a decode's question waits for the room: the router sends both requests at once, so the
   * decode may ask before the prefill has run.
   */
  static final Duration ROOM_WAIT = Duration.ofSeconds(2);

  private final Map<Long, CompletableFuture<PrefilledRoom>> rooms = new ConcurrentHashMap<>();
  private final HttpServer server;

  BootstrapServer(InetSocketAddress address, Executor executor) throws IOException {
    server = HttpServer.create(address, 64);
    server.createContext(ROUTE, this::route);
    server.setExecutor(executor);
    server.start();
  }

  int port() {
    return server.getAddress().getPort();
  }

  /** Makes {@code room} available to the decode. */
  void register(long room, PrefilledRoom prefilled) {
    rooms.computeIfAbsent(room, r -> new CompletableFuture<>()).complete(prefilled);
  }

  private void route(HttpExchange exchange) throws IOException {
    try (exchange) {
      String query = exchange.getRequestURI().getRawQuery();
      Long room = query != null && query.startsWith("bootstrap_room=") ? parseRoom(query.substring(15)) : null;
      if (room == null) {
        ReplyWriter.send(exchange, error(400, "bootstrap_room: expected a non-negative int64"), Duration.ZERO);
        return;
      }
      CompletableFuture<PrefilledRoom> pending = rooms.computeIfAbsent(room, r -> new CompletableFuture<>());
      PrefilledRoom prefilled;
      try {
        prefilled = pending.get(ROOM_WAIT.toMillis(), TimeUnit.MILLISECONDS);
      } catch (TimeoutException | ExecutionException e) {
        rooms.remove(room, pending);
        ReplyWriter.send(exchange, error(404, "bootstrap_room " + room + " was not prefilled here"), Duration.ZERO);
        return;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
      // each room is taken once, as a KV transfer is
      rooms.remove(room, pending);
      ObjectNode body = OpenAiWire.JSON.createObjectNode();
      body.put("prompt_tokens", prefilled.promptTokens()).put("cached_tokens", prefilled.cachedTokens());
      ReplyWriter.send(exchange, new WorkerReply(200, OpenAiWire.JSON_TYPE, OpenAiWire.bytes(body), TokenCounts.UNKNOWN), Duration.ZERO);
    }
  }

  private static Long parseRoom(String text) {
    try {
      long room = Long.parseLong(text);
      return room >= 0 ? room : null;
    } catch (NumberFormatException e) {
      return null;
    }
  }

  static WorkerReply error(int status, String message) {
    return BadRequest.errorReply(status, status == 400 ? "BadRequestError" : "InternalServerError", message);
  }

  @Override
  public void close() {
    server.stop(0);
  }
}
