package io.disaggusage.extproc.stream;

import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import java.util.function.Function;

/**
 * Binds {@code Process} calls to the service's stream observers without grpc-java's stub adapter, which
 * builds a {@code StatusRuntimeException} with a stack trace for every call the client cancels — and
 * Envoy ends every ext_proc stream by cancelling it once its HTTP exchange is done: 3-4 % of the
 * service's CPU through a real Envoy (docs/performance.md). Here a cancellation reaches the stream as
 * one shared exception without a stack trace. Everything else is what the adapter does for a
 * bidirectional call: one message requested at a time, response headers before the first reply, a
 * reply after cancellation refused with {@code CANCELLED}, OK trailers on completion.
 */
public final class ExchangeCallHandler implements ServerCallHandler<ProcessingRequest, ProcessingResponse> {
  /** What a stream hears when Envoy cancels it, and what a reply after that throws; no stack trace. */
  static final StatusRuntimeException CANCELLED = new Cancelled();

  private final Function<StreamObserver<ProcessingResponse>, StreamObserver<ProcessingRequest>> streams;

  /** Binds each call to the stream observer {@code streams} makes for its replies. */
  ExchangeCallHandler(Function<StreamObserver<ProcessingResponse>, StreamObserver<ProcessingRequest>> streams) {
    this.streams = streams;
  }

  /**
   * The ext_proc service with its {@code Process} calls bound this way to the observers {@code streams}
   * makes (the service's, and the benchmark's null processor's, so the floor pays what the service pays).
   */
  public static ServerServiceDefinition bind(
      Function<StreamObserver<ProcessingResponse>, StreamObserver<ProcessingRequest>> streams) {
    return ServerServiceDefinition.builder(ExternalProcessorGrpc.getServiceDescriptor())
        .addMethod(ExternalProcessorGrpc.getProcessMethod(), new ExchangeCallHandler(streams))
        .build();
  }

  @Override
  public ServerCall.Listener<ProcessingRequest> startCall(
      ServerCall<ProcessingRequest, ProcessingResponse> call, Metadata headers) {
    Replies replies = new Replies(call);
    StreamObserver<ProcessingRequest> stream = streams.apply(replies);
    call.request(1);
    return new ServerCall.Listener<>() {
      @Override
      public void onMessage(ProcessingRequest message) {
        stream.onNext(message);
        call.request(1);
      }

      @Override
      public void onHalfClose() {
        stream.onCompleted();
      }

      @Override
      public void onCancel() {
        replies.cancelled = true;
        stream.onError(CANCELLED);
      }
    };
  }

  /**
   * The replies of one call. Called under the owning stream's monitor, as grpc-java asks of a call's
   * methods (they are not thread-safe); {@code cancelled} is set on the transport's thread.
   */
  private static final class Replies implements StreamObserver<ProcessingResponse> {
    private final ServerCall<ProcessingRequest, ProcessingResponse> call;
    private volatile boolean cancelled;
    private boolean headersSent;
    private boolean closed;

    Replies(ServerCall<ProcessingRequest, ProcessingResponse> call) {
      this.call = call;
    }

    @Override
    public void onNext(ProcessingResponse reply) {
      if (cancelled) {
        throw CANCELLED;
      }
      if (closed) {
        throw new IllegalStateException("reply after the call was closed");
      }
      if (!headersSent) {
        call.sendHeaders(new Metadata());
        headersSent = true;
      }
      call.sendMessage(reply);
    }

    @Override
    public void onError(Throwable t) {
      if (closed || cancelled) {
        return;
      }
      closed = true;
      Metadata trailers = Status.trailersFromThrowable(t);
      call.close(Status.fromThrowable(t), trailers == null ? new Metadata() : trailers);
    }

    @Override
    public void onCompleted() {
      if (closed || cancelled) {
        return;
      }
      closed = true;
      call.close(Status.OK, new Metadata());
    }
  }

  private static final class Cancelled extends StatusRuntimeException {
    private static final long serialVersionUID = 1L;

    Cancelled() {
      super(Status.CANCELLED.withDescription("Envoy cancelled the stream"));
    }

    @Override
    public synchronized Throwable fillInStackTrace() {
      return this; // shared, thrown on every cancelled call: a stack trace would say nothing
    }
  }
}
