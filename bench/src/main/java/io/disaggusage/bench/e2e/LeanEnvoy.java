package io.disaggusage.bench.e2e;

import com.google.protobuf.ByteString;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.Channel;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
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
 * timing each chunk's reply. The body messages are built once and shared by every exchange.
 * Everything runs on gRPC's callback threads: no thread of its own, nothing blocks.
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
      List<ProcessingRequest> body = new ArrayList<>(chunks.size());
      for (int i = 0; i < chunks.size(); i++) {
        body.add(ProcessingRequest.newBuilder()
            .setResponseBody(HttpBody.newBuilder().setBody(ByteString.copyFrom(chunks.get(i)))
                .setEndOfStream(i == chunks.size() - 1))
            .build());
      }
      return new Shape(
          cluster,
          ProcessingRequest.newBuilder()
              .setRequestBody(HttpBody.newBuilder().setBody(ByteString.copyFrom(request)).setEndOfStream(true))
              .build(),
          ProcessingRequest.newBuilder()
              .setResponseHeaders(HttpHeaders.newBuilder().setHeaders(headers(":status", "200", "content-type", contentType)))
              .build(),
          body);
    }
  }

  /**
   * Runs one exchange; completes with the body the client would receive when {@code keepBody}, an
   * empty array otherwise, and exceptionally on any protocol surprise.
   */
  CompletableFuture<byte[]> exchange(String path, String id, Shape shape, int requestBytes, boolean keepBody) {
    Call call = new Call(shape, keepBody);
    call.requestHeaders = ProcessingRequest.newBuilder()
        .setRequestHeaders(HttpHeaders.newBuilder().setHeaders(headers(
            ":method", "POST", ":path", path, ":authority", "upstream.local", ":scheme", "http",
            "content-type", "application/json", "x-request-id", id, "content-length", Integer.toString(requestBytes))))
        .putAttributes("envoy.filters.http.ext_proc", Struct.newBuilder()
            .putFields("xds.cluster_name", Value.newBuilder().setStringValue(shape.cluster()).build()).build())
        .build();
    ExternalProcessorGrpc.newStub(channel).process(call);
    // The reply can arrive, and its callback send the next message, before this onNext returns: a
    // call's sends are serialized on the call (a ClientCall is not thread-safe).
    synchronized (call) {
      call.out.onNext(call.requestHeaders);
    }
    return call.done;
  }

  private enum Step { REQUEST_HEADERS, REQUEST_BODY, RESPONSE_HEADERS, RESPONSE_BODY, CLOSING }

  private final class Call implements ClientResponseObserver<ProcessingRequest, ProcessingResponse> {
    final CompletableFuture<byte[]> done = new CompletableFuture<>();
    final Shape shape;
    final ByteArrayOutputStream client;
    final long[] sentAt;
    ProcessingRequest requestHeaders;
    ClientCallStreamObserver<ProcessingRequest> out;
    Step step = Step.REQUEST_HEADERS;
    int answered;

    Call(Shape shape, boolean keepBody) {
      this.shape = shape;
      this.client = keepBody ? new ByteArrayOutputStream() : null;
      this.sentAt = new long[shape.responseBody().size()];
    }

    @Override
    public void beforeStart(ClientCallStreamObserver<ProcessingRequest> requestStream) {
      out = requestStream;
    }

    @Override
    public synchronized void onNext(ProcessingResponse reply) {
      switch (step) {
        case REQUEST_HEADERS -> {
          expect(reply.hasRequestHeaders()
              && reply.getModeOverride().getRequestBodyMode() == BodySendMode.STREAMED);
          step = Step.REQUEST_BODY;
          out.onNext(shape.requestBody());
        }
        case REQUEST_BODY -> {
          expect(reply.hasRequestBody());
          step = Step.RESPONSE_HEADERS;
          out.onNext(shape.responseHeaders());
        }
        case RESPONSE_HEADERS -> {
          expect(reply.hasResponseHeaders()
              && reply.getModeOverride().getResponseBodyMode() == BodySendMode.STREAMED);
          step = Step.RESPONSE_BODY;
          List<ProcessingRequest> body = shape.responseBody();
          for (int i = 0; i < body.size(); i++) {
            sentAt[i] = System.nanoTime();
            out.onNext(body.get(i));
          }
        }
        case RESPONSE_BODY -> {
          if (!reply.hasResponseBody()) {
            expect(reply.hasOverrideMessageTimeout()); // a timer extension is not a reply
            return;
          }
          latency.record(System.nanoTime() - sentAt[answered]);
          replies.increment();
          if (client != null) {
            var common = reply.getResponseBody().getResponse();
            ByteString bytes = common.hasBodyMutation()
                ? common.getBodyMutation().getBody()
                : shape.responseBody().get(answered).getResponseBody().getBody();
            client.writeBytes(bytes.toByteArray());
          }
          if (++answered == sentAt.length) {
            step = Step.CLOSING;
            out.onCompleted();
          }
        }
        case CLOSING -> expect(false);
      }
    }

    private void expect(boolean ok) {
      if (!ok && !done.isDone()) {
        done.completeExceptionally(new IllegalStateException("unexpected reply at " + step));
        out.cancel("unexpected reply", null);
      }
    }

    @Override
    public void onError(Throwable t) {
      done.completeExceptionally(t);
    }

    @Override
    public void onCompleted() {
      if (step != Step.CLOSING) {
        done.completeExceptionally(new IllegalStateException("server closed the stream at " + step));
      }
      done.complete(client == null ? new byte[0] : client.toByteArray());
    }
  }

  private static HeaderMap headers(String... pairs) {
    HeaderMap.Builder map = HeaderMap.newBuilder();
    for (int i = 0; i < pairs.length; i += 2) {
      map.addHeaders(HeaderValue.newBuilder().setKey(pairs[i])
          .setRawValue(ByteString.copyFrom(pairs[i + 1], StandardCharsets.UTF_8)));
    }
    return map.build();
  }
}
