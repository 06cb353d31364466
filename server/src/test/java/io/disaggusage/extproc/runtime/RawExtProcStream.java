package io.disaggusage.extproc.runtime;

import com.google.protobuf.ByteString;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.Channel;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/** One ext_proc {@code Process} stream driven message by message, as Envoy would, for transport tests. */
final class RawExtProcStream {
  private final BlockingQueue<ProcessingResponse> replies = new LinkedBlockingQueue<>();
  private final CompletableFuture<Status> closed = new CompletableFuture<>();
  private final StreamObserver<ProcessingRequest> requests;

  RawExtProcStream(Channel channel) {
    requests =
        ExternalProcessorGrpc.newStub(channel)
            .process(
                new StreamObserver<>() {
                  @Override
                  public void onNext(ProcessingResponse reply) {
                    replies.add(reply);
                  }

                  @Override
                  public void onError(Throwable t) {
                    closed.complete(Status.fromThrowable(t));
                  }

                  @Override
                  public void onCompleted() {
                    closed.complete(Status.OK);
                  }
                });
  }

  /** Request headers of an HTTP request; {@code endOfStream} false means a body follows. */
  static ProcessingRequest requestHeaders(String method, String path, boolean endOfStream) {
    HeaderMap headers =
        HeaderMap.newBuilder()
            .addHeaders(header(":method", method))
            .addHeaders(header(":path", path))
            .addHeaders(header(":authority", "worker"))
            .addHeaders(header(":scheme", "http"))
            .addHeaders(header("content-type", "application/json"))
            .build();
    return ProcessingRequest.newBuilder()
        .setRequestHeaders(HttpHeaders.newBuilder().setHeaders(headers).setEndOfStream(endOfStream))
        .build();
  }

  static ProcessingRequest requestBody(String text, boolean endOfStream) {
    return ProcessingRequest.newBuilder()
        .setRequestBody(
            HttpBody.newBuilder().setBody(ByteString.copyFromUtf8(text)).setEndOfStream(endOfStream))
        .build();
  }

  private static HeaderValue header(String name, String value) {
    return HeaderValue.newBuilder()
        .setKey(name)
        .setRawValue(ByteString.copyFrom(value, StandardCharsets.UTF_8))
        .build();
  }

  /** Sends one message and waits up to 5 s for its reply. */
  ProcessingResponse exchange(ProcessingRequest request) throws InterruptedException {
    requests.onNext(request);
    ProcessingResponse reply = replies.poll(5, TimeUnit.SECONDS);
    if (reply == null) {
      throw new AssertionError("no reply within 5 s; stream closed with " + closed.getNow(null));
    }
    return reply;
  }

  /** Completes with the stream's final status (OK when the server completed it). */
  CompletableFuture<Status> closed() {
    return closed;
  }

  /** Ends the stream from the client side, as Envoy does when the exchange is over. */
  void cancel() {
    requests.onError(Status.CANCELLED.withDescription("exchange over").asRuntimeException());
  }
}
