package io.disaggusage.extproc.testkit;

import com.sun.net.httpserver.HttpHandler;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * The JDK's HTTP/1.1 server on a free loopback port, one thread per exchange so a streamed relay never
 * holds up another client: what the orchestrator fixtures and the toy proxy listen with.
 */
public final class LoopbackServer implements AutoCloseable {
  private final ExecutorService executor = Executors.newCachedThreadPool();
  private final HttpServer server;

  public LoopbackServer(HttpHandler handler) {
    try {
      server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 64);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    server.setExecutor(executor);
    server.createContext("/", handler);
    server.start();
  }

  /** {@code http://127.0.0.1:PORT}, the base URL a client is given. */
  public String baseUrl() {
    return "http://127.0.0.1:" + server.getAddress().getPort();
  }

  @Override
  public void close() {
    server.stop(0);
    executor.shutdownNow();
  }
}
