package io.disaggusage.extproc.edgeguard;

import com.google.protobuf.ByteString;
import io.disaggusage.extproc.classify.RequestHead;
import io.disaggusage.extproc.edge.MemberRemover;
import io.disaggusage.extproc.edge.Rejection;
import io.disaggusage.extproc.metrics.EdgeGuardMetrics;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.stream.BodyBytes;
import io.disaggusage.extproc.stream.EnvoyMessages;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.config.core.v3.HeaderValueOption;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.HeaderSendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ImmediateResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.type.v3.HttpStatus;
import io.envoyproxy.envoy.type.v3.StatusCode;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Set;

/**
 * One client request through the edge guard. The request headers reply removes the headers {@link
 * HeaderStrip} names; a POST to a handled path with a body also turns on the STREAMED request body and
 * request trailers, and each body chunk is answered at once with what the {@link MemberRemover} makes
 * of it. A body that is not one JSON object is answered with a 400 of Envoy's making (an immediate
 * response): the engines refuse such a body too, and forwarding it unchecked would let a parser that
 * reads it differently find a member this one did not see. The response is never asked for. Every
 * message is answered in the call that brings it; nothing waits. Guarded by this object's monitor.
 */
final class EdgeGuardStream implements StreamObserver<ProcessingRequest> {
  private static final byte[] EMPTY = new byte[0];

  /** The body streams through, and its end comes either in a body message or as trailers. */
  private static final ProcessingMode READ_BODY =
      ProcessingMode.newBuilder()
          .setRequestHeaderMode(HeaderSendMode.SEND)
          .setResponseHeaderMode(HeaderSendMode.SKIP)
          .setRequestBodyMode(BodySendMode.STREAMED)
          .setResponseBodyMode(BodySendMode.NONE)
          .setRequestTrailerMode(HeaderSendMode.SEND)
          .setResponseTrailerMode(HeaderSendMode.SKIP)
          .build();

  private final EdgeGuardService.Shared shared;
  private final StreamObserver<ProcessingResponse> out;
  /** Reads the request body; null when it is not read, or has ended. */
  private MemberRemover remover;
  /** Whether any header was removed. */
  private boolean headersStripped;
  /** Nothing more is answered: the request was refused, failed, or the stream is over. */
  private boolean closed;
  /** The stream is over (counted once). */
  private boolean ended;

  EdgeGuardStream(EdgeGuardService.Shared shared, StreamObserver<ProcessingResponse> out) {
    this.shared = shared;
    this.out = out;
    shared.metrics().streamOpened();
  }

  @Override
  public synchronized void onNext(ProcessingRequest request) {
    if (closed) {
      return;
    }
    long started = System.nanoTime();
    try {
      answer(request);
    } catch (RuntimeException e) {
      fail(e);
    }
    shared.metrics().processed(kind(request), System.nanoTime() - started);
  }

  private static Metrics.Message kind(ProcessingRequest request) {
    return switch (request.getRequestCase()) {
      case REQUEST_HEADERS -> Metrics.Message.REQUEST_HEADERS;
      case REQUEST_BODY -> Metrics.Message.REQUEST_BODY;
      default -> Metrics.Message.OTHER;
    };
  }

  private void answer(ProcessingRequest request) {
    switch (request.getRequestCase()) {
      case REQUEST_HEADERS -> onHeaders(request);
      case REQUEST_BODY -> onBody(request.getRequestBody());
      case REQUEST_TRAILERS -> onTrailers();
      // Never asked for; answered as they are if a filter setting sends them all the same.
      case RESPONSE_HEADERS -> send(EnvoyMessages.responseHeaders(null, null, null));
      case RESPONSE_BODY -> send(EnvoyMessages.body(false, null, null));
      case RESPONSE_TRAILERS -> send(EnvoyMessages.trailers(false));
      default -> {} // nothing Envoy expects an answer to
    }
  }

  /**
   * An internal error: the stream ends with an error status, so Envoy applies its {@code
   * failure_mode_allow} (the shipped edge filter refuses the request). The class and the failing frame
   * only are logged: an exception message could quote body bytes.
   */
  private void fail(RuntimeException e) {
    remover = null;
    closed = true;
    StackTraceElement[] frames = e.getStackTrace();
    shared.errors().warn("edge guard: internal error {} at {}; the stream ends with an error", e.getClass().getName(),
        frames.length == 0 ? "?" : frames[0]);
    out.onError(io.grpc.Status.INTERNAL.withDescription("edge guard internal error").asRuntimeException());
  }

  private void onHeaders(ProcessingRequest request) {
    HttpHeaders headers = request.getRequestHeaders();
    Set<String> strip = shared.headers().present(headers.getHeaders());
    headersStripped = !strip.isEmpty();
    for (String name : strip) {
      shared.edge().removedHeader(shared.headers().label(name));
    }
    RequestHead head = EnvoyMessages.requestHead(request);
    if (shared.removal() == null
        || headers.getEndOfStream()
        || !"POST".equals(head.method())
        || !shared.paths().contains(head.path())) {
      finish(Map.of());
      send(EnvoyMessages.requestHeaders(HeaderStrip.removing(strip), EnvoyMessages.allOff()));
      return;
    }
    remover = shared.removal().start();
    // The body may come out shorter, so the content-length Envoy saw must not reach the upstream: Envoy
    // drops it itself only for a body mode configured on the filter, not for one a mode_override turns on.
    send(EnvoyMessages.requestHeaders(HeaderStrip.removing(strip, "content-length"), READ_BODY));
  }

  private void onBody(HttpBody chunk) {
    if (remover == null) {
      return; // after the body's end (Envoy can repeat the last message): nothing is owed
    }
    byte[] in = BodyBytes.of(chunk.getBody());
    byte[] forwarded = remover.accept(in, chunk.getEndOfStream());
    if (remover.rejection() != null) {
      refuse(remover.rejection());
      return;
    }
    if (chunk.getEndOfStream()) {
      finish(remover.removed()); // counted before Envoy can let the request go on
    }
    send(EnvoyMessages.body(true, forwarded == in ? null : BodyBytes.wrap(forwarded), null));
  }

  /** The body ended with trailers, which carry no body bytes: what was read decides. */
  private void onTrailers() {
    if (remover != null) {
      remover.accept(EMPTY, true); // a complete object holds nothing back after its closing brace
      if (remover.rejection() != null) {
        refuse(remover.rejection());
        return;
      }
      finish(remover.removed());
    }
    send(EnvoyMessages.trailers(true));
  }

  /** The request goes on to the upstream: what was removed, and its outcome, are counted. */
  private void finish(Map<String, Integer> members) {
    remover = null;
    members.forEach(shared.edge()::removedMembers);
    shared.edge().request(
        headersStripped || !members.isEmpty() ? EdgeGuardMetrics.Outcome.STRIPPED : EdgeGuardMetrics.Outcome.CLEAN);
  }

  /** Answers the client 400 in Envoy's name; nothing more of the request reaches the upstream. */
  private void refuse(Rejection reason) {
    remover = null;
    shared.edge().rejected(reason);
    shared.edge().request(EdgeGuardMetrics.Outcome.REJECTED);
    send(rejection(reason));
    closed = true;
  }

  /** An OpenAI-style error body: the status and reason only, never a byte of the request. */
  static ProcessingResponse rejection(Rejection reason) {
    String body =
        "{\"error\":{\"message\":\"the request body is not one JSON object (" + reason.label() + ")\","
            + "\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}";
    return ProcessingResponse.newBuilder()
        .setImmediateResponse(
            ImmediateResponse.newBuilder()
                .setStatus(HttpStatus.newBuilder().setCode(StatusCode.BadRequest))
                .setHeaders(
                    HeaderMutation.newBuilder()
                        .addSetHeaders(
                            HeaderValueOption.newBuilder()
                                .setHeader(
                                    HeaderValue.newBuilder()
                                        .setKey("content-type")
                                        .setRawValue(ByteString.copyFromUtf8("application/json")))))
                .setBody(ByteString.copyFrom(body, StandardCharsets.UTF_8))
                .setDetails("edge_guard_" + reason.label()))
        .build();
  }

  private void send(ProcessingResponse reply) {
    try {
      out.onNext(reply);
    } catch (StatusRuntimeException e) {
      closed = true; // Envoy cancelled the stream meanwhile; the cancellation arrives through onError
    }
  }

  @Override
  public synchronized void onError(Throwable t) {
    end();
  }

  @Override
  public synchronized void onCompleted() {
    out.onCompleted(); // a call already closed or cancelled ignores it
    end();
  }

  private void end() {
    remover = null;
    closed = true;
    if (!ended) {
      ended = true;
      shared.metrics().streamClosed();
    }
  }
}
