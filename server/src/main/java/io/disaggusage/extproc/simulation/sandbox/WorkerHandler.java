package io.disaggusage.extproc.simulation.sandbox;

import com.sun.net.httpserver.HttpExchange;
import io.disaggusage.extproc.simulation.engines.WorkerCall;
import io.disaggusage.extproc.simulation.engines.WorkerReply;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Function;

/**
 * A simulated worker over HTTP: one leg of a {@link io.disaggusage.extproc.simulation.engines.DisaggEngine}
 * (its context or its generation worker) answering the POSTs Envoy forwards to it.
 */
final class WorkerHandler implements LoopbackHttp.PostHandler {
  /**
   * A decode worker emits its tokens over time: a pause before each event makes a stream visibly
   * stream with {@code curl -N}, and keeps its events in separate chunks on the way through Envoy.
   */
  static final long EVENT_PAUSE_MILLIS = 15;

  private final Function<WorkerCall, WorkerReply> leg;

  WorkerHandler(Function<WorkerCall, WorkerReply> leg) {
    this.leg = leg;
  }

  @Override
  public void post(HttpExchange exchange, byte[] body) throws IOException {
    WorkerCall call = new WorkerCall(exchange.getRequestURI().getPath(), lowerCaseHeaders(exchange), body);
    LoopbackHttp.send(exchange, leg.apply(call), EVENT_PAUSE_MILLIS);
  }

  /** The request headers as the engines read them: lower-case names, first value each. */
  private static Map<String, String> lowerCaseHeaders(HttpExchange exchange) {
    Map<String, String> headers = new LinkedHashMap<>();
    for (Map.Entry<String, List<String>> header : exchange.getRequestHeaders().entrySet()) {
      if (!header.getValue().isEmpty()) {
        headers.putIfAbsent(header.getKey().toLowerCase(Locale.ROOT), header.getValue().get(0));
      }
    }
    return headers;
  }
}
