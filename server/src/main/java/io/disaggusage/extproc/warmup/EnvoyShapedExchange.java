package io.disaggusage.extproc.warmup;

import com.google.protobuf.ByteString;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import io.disaggusage.extproc.driver.FilterConfigs;
import io.disaggusage.extproc.warmup.WarmupFlows.Leg;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.config.core.v3.Metadata;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.HeaderSendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.CommonResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProtocolConfiguration;
import io.grpc.Channel;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * One HTTP exchange sent over a gRPC channel the way Envoy's ext_proc filter sends it with the shipped
 * settings ({@code deploy/envoy/envoy.yaml}): request headers with {@code raw_value} headers, the
 * {@code xds.cluster_name} attribute, the (empty) metadata context and the protocol configuration, as
 * Envoy 1.40 sends them; then bodies and response headers only as the service's mode overrides ask,
 * each message after the previous reply, bodies in several chunks; at the end a half-close or a reset,
 * as Envoy ends a stream either way.
 */
final class EnvoyShapedExchange implements StreamObserver<ProcessingResponse> {
  /** The shipped filter's processing mode: headers only until the service asks for more. */
  private static final ProcessingMode SHIPPED_MODE =
      FilterConfigs.shipped("any namespace: only the mode is used").getProcessingMode();
  /** Bodies go in several chunks, so the scanners and rewriters meet values cut between chunks. */
  private static final int REQUEST_CHUNKS = 2;
  private static final int RESPONSE_CHUNKS = 3;

  /** A reply that did not come in time, or a stream the service ended early. */
  static final class Stalled extends Exception {
    Stalled(String message) {
      super(message);
    }
  }

  /** What the client got and how long the slowest reply took. */
  record Result(String clientBody, long slowestReplyNanos) {}

  private final BlockingQueue<Object> replies = new LinkedBlockingQueue<>();
  private final Duration replyTimeout;
  private final Leg leg;
  private long slowestReplyNanos;

  private EnvoyShapedExchange(Leg leg, Duration replyTimeout) {
    this.leg = leg;
    this.replyTimeout = replyTimeout;
  }

  /**
   * Runs {@code leg} over {@code channel}; ends the stream with a half-close when {@code halfClose},
   * else with a reset.
   */
  static Result run(Channel channel, Leg leg, Duration replyTimeout, boolean halfClose)
      throws Stalled, InterruptedException {
    EnvoyShapedExchange exchange = new EnvoyShapedExchange(leg, replyTimeout);
    StreamObserver<ProcessingRequest> requests = ExternalProcessorGrpc.newStub(channel).process(exchange);
    try {
      String body = exchange.drive(requests);
      if (halfClose) {
        requests.onCompleted();
      } else {
        requests.onError(Status.CANCELLED.withDescription("exchange over").asRuntimeException());
      }
      return new Result(body, exchange.slowestReplyNanos);
    } catch (Stalled | InterruptedException | RuntimeException e) {
      requests.onError(Status.CANCELLED.withDescription("warm-up exchange failed").asRuntimeException());
      throw e;
    }
  }

  private String drive(StreamObserver<ProcessingRequest> requests) throws Stalled, InterruptedException {
    ProcessingRequest headers =
        ProcessingRequest.newBuilder()
            .setRequestHeaders(HttpHeaders.newBuilder().setHeaders(requestHeaders()))
            .putAttributes(FilterConfigs.FILTER_NAME, clusterAttribute())
            .setMetadataContext(Metadata.getDefaultInstance())
            .setProtocolConfig(
                ProtocolConfiguration.newBuilder()
                    .setRequestBodyMode(SHIPPED_MODE.getRequestBodyMode())
                    .setResponseBodyMode(SHIPPED_MODE.getResponseBodyMode()))
            .build();
    ProcessingMode mode = sendHeaders(requests, headers, SHIPPED_MODE);
    if (mode.getRequestBodyMode() != BodySendMode.NONE) {
      sendChunks(requests, true, leg.requestBody(), REQUEST_CHUNKS, null);
    }
    if (mode.getResponseHeaderMode() != HeaderSendMode.SKIP) {
      ProcessingRequest responseHeaders =
          ProcessingRequest.newBuilder()
              .setResponseHeaders(HttpHeaders.newBuilder().setHeaders(responseHeaders()))
              .build();
      mode = sendHeaders(requests, responseHeaders, mode);
    }
    if (mode.getResponseBodyMode() == BodySendMode.NONE) {
      return new String(leg.responseBody(), StandardCharsets.UTF_8);
    }
    ByteArrayOutputStream client = new ByteArrayOutputStream();
    sendChunks(requests, false, leg.responseBody(), RESPONSE_CHUNKS, client);
    return client.toString(StandardCharsets.UTF_8);
  }

  /**
   * Sends {@code body} in {@code chunks} messages (STREAMED), the last one ending the stream; writes what
   * reaches the client (the chunk, or the service's replacement) to {@code client} when given.
   */
  private void sendChunks(
      StreamObserver<ProcessingRequest> requests, boolean request, byte[] body, int chunks, ByteArrayOutputStream client)
      throws Stalled, InterruptedException {
    for (int i = 0; i < chunks; i++) {
      byte[] chunk = Arrays.copyOfRange(body, body.length * i / chunks, body.length * (i + 1) / chunks);
      HttpBody message =
          HttpBody.newBuilder().setBody(ByteString.copyFrom(chunk)).setEndOfStream(i == chunks - 1).build();
      ProcessingRequest.Builder builder = ProcessingRequest.newBuilder();
      ProcessingResponse reply =
          send(requests, request ? builder.setRequestBody(message).build() : builder.setResponseBody(message).build());
      if (client != null) {
        CommonResponse common = reply.getResponseBody().getResponse();
        client.writeBytes(common.hasBodyMutation() ? common.getBodyMutation().getBody().toByteArray() : chunk);
      }
    }
  }

  /** Sends a headers message; Envoy takes a mode override from its reply for the rest of the exchange. */
  private ProcessingMode sendHeaders(
      StreamObserver<ProcessingRequest> requests, ProcessingRequest message, ProcessingMode mode)
      throws Stalled, InterruptedException {
    ProcessingResponse reply = send(requests, message);
    return reply.hasModeOverride() ? reply.getModeOverride() : mode;
  }

  /** Sends one message and waits for its reply. */
  private ProcessingResponse send(StreamObserver<ProcessingRequest> requests, ProcessingRequest message)
      throws Stalled, InterruptedException {
    long sent = System.nanoTime();
    requests.onNext(message);
    while (true) {
      Object next = replies.poll(replyTimeout.toNanos(), TimeUnit.NANOSECONDS);
      if (next == null) {
        throw new Stalled("no reply to " + message.getRequestCase() + " within " + replyTimeout.toMillis() + " ms");
      }
      if (!(next instanceof ProcessingResponse reply)) {
        throw new Stalled("the stream ended before the reply to " + message.getRequestCase() + ": " + next);
      }
      if (reply.getResponseCase() == ProcessingResponse.ResponseCase.RESPONSE_NOT_SET) {
        continue; // a timer extension, not a reply
      }
      slowestReplyNanos = Math.max(slowestReplyNanos, System.nanoTime() - sent);
      return reply;
    }
  }

  private HeaderMap requestHeaders() {
    HeaderMap.Builder headers = HeaderMap.newBuilder();
    add(headers, ":authority", "worker:8000");
    add(headers, ":path", leg.path());
    add(headers, ":method", "POST");
    add(headers, ":scheme", "http");
    add(headers, "user-agent", "python-httpx/0.28.1");
    add(headers, "accept-encoding", "gzip, deflate");
    add(headers, "content-type", "application/json");
    add(headers, "content-length", Integer.toString(leg.requestBody().length));
    add(headers, "x-forwarded-proto", "http");
    for (String header : leg.extraHeaders()) {
      int colon = header.indexOf(':');
      add(headers, header.substring(0, colon), header.substring(colon + 1));
    }
    return headers.build();
  }

  private HeaderMap responseHeaders() {
    HeaderMap.Builder headers = HeaderMap.newBuilder();
    add(headers, ":status", "200");
    add(headers, "date", "Mon, 01 Jun 2026 12:00:00 GMT");
    add(headers, "server", "uvicorn");
    add(headers, "content-type", leg.responseType());
    if (!leg.responseType().startsWith("text/event-stream")) {
      add(headers, "content-length", Integer.toString(leg.responseBody().length));
    }
    add(headers, "x-envoy-upstream-service-time", "1");
    return headers.build();
  }

  private Struct clusterAttribute() {
    return Struct.newBuilder()
        .putFields("xds.cluster_name", Value.newBuilder().setStringValue(leg.cluster()).build())
        .build();
  }

  private static void add(HeaderMap.Builder headers, String name, String value) {
    headers.addHeaders(
        HeaderValue.newBuilder().setKey(name).setRawValue(ByteString.copyFrom(value, StandardCharsets.UTF_8)));
  }

  @Override
  public void onNext(ProcessingResponse reply) {
    replies.add(reply);
  }

  @Override
  public void onError(Throwable t) {
    replies.add(Status.fromThrowable(t).toString());
  }

  @Override
  public void onCompleted() {
    replies.add("completed by the service");
  }

}
