package io.disaggusage.extproc.emulator.workers;

import com.sun.net.httpserver.HttpExchange;
import io.disaggusage.extproc.emulator.engines.WorkerReply;
import io.disaggusage.extproc.driver.Chunking;
import java.io.IOException;
import java.io.OutputStream;
import java.time.Duration;

/** Writes a worker's reply the way the engines' servers (uvicorn) do. */
public final class ReplyWriter {
  private ReplyWriter() {}

  /**
   * Sends {@code reply}: an event stream chunked, one event per write, each flushed (a chunk of its own)
   * after {@code eventPause}; anything else in one piece with its content-length.
   */
  public static void send(HttpExchange exchange, WorkerReply reply, Duration eventPause) throws IOException {
    exchange.getResponseHeaders().set("content-type", reply.contentType());
    byte[] body = reply.body();
    if (!reply.contentType().startsWith("text/event-stream")) {
      exchange.sendResponseHeaders(reply.status(), body.length == 0 ? -1 : body.length);
      try (OutputStream out = exchange.getResponseBody()) {
        out.write(body);
      }
      return;
    }
    exchange.sendResponseHeaders(reply.status(), 0);
    try (OutputStream out = exchange.getResponseBody()) {
      for (byte[] event : Chunking.sseEvents().split(body)) {
        pause(eventPause);
        out.write(event);
        out.flush();
      }
    }
  }

  static void pause(Duration pause) throws IOException {
    if (pause.isZero()) {
      return;
    }
    try {
      Thread.sleep(pause.toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted while answering", e);
    }
  }
}
