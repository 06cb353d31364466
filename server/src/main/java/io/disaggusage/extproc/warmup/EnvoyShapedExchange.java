package io.disaggusage.extproc.warmup;

import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.driver.Direction;
import io.disaggusage.extproc.driver.EnvoyRequests;
import io.disaggusage.extproc.driver.EnvoyStream;
import io.disaggusage.extproc.driver.FilterConfigs;
import io.disaggusage.extproc.warmup.WarmupFlows.Leg;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.Metadata;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase;
import io.grpc.Channel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * One HTTP exchange sent over a gRPC channel (through the driver's {@link EnvoyStream}) the way Envoy's
 * ext_proc filter sends it with the shipped settings ({@code deploy/envoy/envoy.yaml}): request headers
 * with {@code raw_value} headers, the {@code xds.cluster_name} attribute, the (empty) metadata context
 * and the protocol configuration, as Envoy 1.40 sends them; then bodies and response headers only as
 * the service's mode overrides ask, each message after the previous reply, bodies in several chunks; at
 * the end a half-close or a reset, as Envoy ends a stream either way.
 */
final class EnvoyShapedExchange {
  /** Bodies go in several chunks, so the scanners and rewriters meet values cut between chunks. */
  private static final Chunking REQUEST_CHUNKS = Chunking.parts(2);
  private static final Chunking RESPONSE_CHUNKS = Chunking.parts(3);

  /** A reply that did not come in time, a reply against the protocol, or a stream the service ended early. */
  static final class Stalled extends Exception {
    Stalled(String message) {
      super(message);
    }
  }

  /** What the client got and how long the slowest reply took. */
  record Result(String clientBody, long slowestReplyNanos) {}

  private final EnvoyStream stream;
  private final Duration replyTimeout;

  private EnvoyShapedExchange(EnvoyStream stream, Duration replyTimeout) {
    this.stream = stream;
    this.replyTimeout = replyTimeout;
  }

  /**
   * Runs {@code leg} over {@code channel}; ends the stream with a half-close when {@code halfClose},
   * else with a reset.
   */
  static Result run(Channel channel, Leg leg, Duration replyTimeout, boolean halfClose)
      throws Stalled, InterruptedException {
    EnvoyStream stream = EnvoyStream.open(ExternalProcessorGrpc.newStub(channel)::process);
    try {
      new EnvoyShapedExchange(stream, replyTimeout).drive(leg);
    } catch (Stalled | InterruptedException | RuntimeException e) {
      stream.cancel();
      throw e;
    }
    if (halfClose) {
      stream.complete();
    } else {
      stream.cancel();
    }
    return new Result(stream.clientBodyUtf8(), stream.slowestReplyNanos());
  }

  private void drive(Leg leg) throws Stalled, InterruptedException {
    ProcessingRequest headers =
        EnvoyRequests.requestHeaders(requestHeaders(leg), leg.cluster(), false)
            .setMetadataContext(Metadata.getDefaultInstance())
            .setProtocolConfig(EnvoyRequests.protocolConfiguration(FilterConfigs.shippedMode()))
            .build();
    settle(stream.send(headers));
    body(Direction.REQUEST, REQUEST_CHUNKS.split(leg.requestBody()));
    settle(stream.responseHeaders(responseHeaders(leg), false));
    body(Direction.RESPONSE, RESPONSE_CHUNKS.split(leg.responseBody()));
  }

  /** A body in STREAMED messages, each after the previous reply, the last ending the stream. */
  private void body(Direction direction, List<byte[]> chunks) throws Stalled, InterruptedException {
    for (int i = 0; i < chunks.size(); i++) {
      settle(stream.chunk(direction, chunks.get(i), i == chunks.size() - 1));
    }
  }

  /** Waits for the reply to what was just sent. */
  private void settle(EnvoyStream sent) throws Stalled, InterruptedException {
    RequestCase waiting = sent.oldestOwed();
    boolean replied = sent.awaitReplies(replyTimeout);
    if (sent.violation() != null) {
      throw new Stalled(sent.violation());
    }
    if (!replied && sent.serverClosed()) {
      throw new Stalled("the stream ended before the reply to " + waiting);
    }
    if (!replied) {
      throw new Stalled("no reply to " + waiting + " within " + replyTimeout.toMillis() + " ms");
    }
  }

  private static HeaderMap requestHeaders(Leg leg) {
    List<String> headers =
        new ArrayList<>(
            List.of(
                ":authority", "worker:8000",
                ":path", leg.path(),
                ":method", "POST",
                ":scheme", "http",
                "user-agent", "python-httpx/0.28.1",
                "accept-encoding", "gzip, deflate",
                "content-type", "application/json",
                "content-length", Integer.toString(leg.requestBody().length),
                "x-forwarded-proto", "http"));
    for (String header : leg.extraHeaders()) {
      int colon = header.indexOf(':');
      headers.add(header.substring(0, colon));
      headers.add(header.substring(colon + 1));
    }
    return EnvoyRequests.headers(headers.toArray(String[]::new));
  }

  private static HeaderMap responseHeaders(Leg leg) {
    List<String> headers =
        new ArrayList<>(
            List.of(
                ":status", "200",
                "date", "Mon, 01 Jun 2026 12:00:00 GMT",
                "server", "uvicorn",
                "content-type", leg.responseType()));
    if (!leg.responseType().startsWith("text/event-stream")) {
      headers.addAll(List.of("content-length", Integer.toString(leg.responseBody().length)));
    }
    headers.addAll(List.of("x-envoy-upstream-service-time", "1"));
    return EnvoyRequests.headers(headers.toArray(String[]::new));
  }
}
