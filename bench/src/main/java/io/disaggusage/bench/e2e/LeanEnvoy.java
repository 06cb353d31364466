package io.disaggusage.bench.e2e;

import io.disaggusage.extproc.driver.Direction;
import io.disaggusage.extproc.driver.EnvoyRequests;
import io.disaggusage.extproc.driver.EnvoyStream;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.Channel;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.LongAdder;

/**
 * A lean driver speaking the same ext_proc protocol as Envoy with STREAMED bodies, for when the fake
 * Envoy (which models every filter rule, timer and mutation check, and records every message) costs
 * more CPU than the servers it drives. Per exchange it sends the request headers (with the
 * {@code xds.cluster_name} attribute), waits for the reply and checks its {@code mode_override},
 * sends the request body, then the response headers, and on their reply every response body chunk at
 * once (Envoy forwards STREAMED chunks as the upstream delivers them, without waiting for replies),
 * timing each chunk's reply. The driver library's {@link EnvoyStream} matches the replies and applies
 * the body mutations; the body messages are built once and shared by every exchange. Everything runs
 * on gRPC's callback threads: no thread of its own, nothing blocks.
 */
final class LeanEnvoy {
  private final Channel channel;
  private final LatencyHistogram latency = new LatencyHistogram();
  private final LongAdder replies = new LongAdder();

  LeanEnvoy(Channel channel) {
    this.channel = channel;
  }

  LatencyHistogram latency() {
    return latency;
  }

  long replies() {
    return replies.sum();
  }

  void reset() {
    latency.reset();
    replies.reset();
  }

  /** What one exchange sends, apart from the request headers (built per exchange for its id). */
  record Shape(String cluster, ProcessingRequest requestBody, ProcessingRequest responseHeaders,
      List<ProcessingRequest> responseBody) {

    static Shape of(String cluster, byte[] request, String contentType, List<byte[]> chunks) {
      return new Shape(
          cluster,
          EnvoyRequests.body(Direction.REQUEST, request, true),
          EnvoyRequests.responseHeaders(EnvoyRequests.headers(":status", "200", "content-type", contentType), false),
          EnvoyRequests.body(Direction.RESPONSE, chunks));
    }
  }

  /**
   * Runs one exchange; completes with the body the client would receive when {@code keepBody}, an
   * empty array otherwise, and exceptionally on any protocol surprise.
   */
  CompletableFuture<byte[]> exchange(String path, String id, Shape shape, int requestBytes, boolean keepBody) {
    ProcessingRequest requestHeaders = EnvoyRequests.requestHeaders(
            EnvoyRequests.headers(
                ":method", "POST", ":path", path, ":authority", "upstream.local", ":scheme", "http",
                "content-type", "application/json", "x-request-id", id, "content-length", Integer.toString(requestBytes)),
            shape.cluster(),
            false)
        .build();
    Call call = new Call(shape);
    call.stream = EnvoyStream.open(ExternalProcessorGrpc.newStub(channel)::process, keepBody, call);
    call.stream.send(requestHeaders);
    return call.done;
  }

  /** One exchange's script: each reply sends what Envoy sends next. */
  private final class Call implements EnvoyStream.Listener {
    final CompletableFuture<byte[]> done = new CompletableFuture<>();
    final Shape shape;
    EnvoyStream stream;
    int answered;
    boolean closing;

    Call(Shape shape) {
      this.shape = shape;
    }

    @Override
    public void replied(RequestCase kind, ProcessingResponse reply, long nanos) {
      switch (kind) {
        case REQUEST_HEADERS -> {
          if (expect(stream.mode().getRequestBodyMode() == BodySendMode.STREAMED, kind)) {
            stream.send(shape.requestBody());
          }
        }
        case REQUEST_BODY -> stream.send(shape.responseHeaders());
        case RESPONSE_HEADERS -> {
          if (expect(stream.mode().getResponseBodyMode() == BodySendMode.STREAMED, kind)) {
            shape.responseBody().forEach(stream::send);
          }
        }
        case RESPONSE_BODY -> {
          latency.record(nanos);
          replies.increment();
          if (++answered == shape.responseBody().size()) {
            closing = true;
            stream.complete();
          }
        }
        default -> expect(false, kind);
      }
    }

    private boolean expect(boolean ok, RequestCase kind) {
      if (!ok) {
        violated("unexpected reply to " + kind);
      }
      return ok;
    }

    @Override
    public void violated(String what) {
      if (!done.isDone()) {
        done.completeExceptionally(new IllegalStateException(what));
        stream.cancel();
      }
    }

    @Override
    public void closed(Throwable error) {
      if (error != null) {
        done.completeExceptionally(error);
      } else if (!closing) {
        done.completeExceptionally(
            new IllegalStateException("server closed the stream with a reply to " + stream.oldestOwed() + " owed"));
      }
      done.complete(stream.clientBody());
    }
  }
}
