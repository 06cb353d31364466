package io.disaggusage.extproc.stream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.Attributes;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.ServerCall;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** The call binding does what grpc-java's stub adapter does for a bidirectional call, less its cost. */
class ExchangeCallHandlerTest {

  /** A call that records what the handler does with it. */
  private static final class RecordingCall extends ServerCall<ProcessingRequest, ProcessingResponse> {
    final List<String> events = new ArrayList<>();
    int requested;

    @Override
    public void request(int numMessages) {
      requested += numMessages;
    }

    @Override
    public void sendHeaders(Metadata headers) {
      events.add("headers");
    }

    @Override
    public void sendMessage(ProcessingResponse message) {
      events.add("message");
    }

    @Override
    public void close(Status status, Metadata trailers) {
      events.add("close " + status.getCode());
    }

    @Override
    public boolean isCancelled() {
      return false;
    }

    @Override
    public Attributes getAttributes() {
      return Attributes.EMPTY;
    }

    @Override
    public MethodDescriptor<ProcessingRequest, ProcessingResponse> getMethodDescriptor() {
      return ExternalProcessorGrpc.getProcessMethod();
    }
  }

  /** A stream that echoes a reply per message and remembers what it heard. */
  private static final class EchoStream implements StreamObserver<ProcessingRequest> {
    final StreamObserver<ProcessingResponse> out;
    final List<Object> heard = new ArrayList<>();

    EchoStream(StreamObserver<ProcessingResponse> out) {
      this.out = out;
    }

    @Override
    public void onNext(ProcessingRequest value) {
      heard.add("message");
      out.onNext(ProcessingResponse.getDefaultInstance());
    }

    @Override
    public void onError(Throwable t) {
      heard.add(t);
    }

    @Override
    public void onCompleted() {
      heard.add("completed");
      out.onCompleted();
    }
  }

  private final AtomicReference<EchoStream> stream = new AtomicReference<>();
  private final ExchangeCallHandler handler =
      new ExchangeCallHandler(out -> {
        EchoStream s = new EchoStream(out);
        stream.set(s);
        return s;
      });

  @Test
  void requestsOneMessageAtATimeSendsHeadersOnceAndClosesOkOnHalfClose() {
    RecordingCall call = new RecordingCall();
    ServerCall.Listener<ProcessingRequest> listener = handler.startCall(call, new Metadata());
    assertThat(call.requested).isEqualTo(1);
    listener.onMessage(ProcessingRequest.getDefaultInstance());
    listener.onMessage(ProcessingRequest.getDefaultInstance());
    assertThat(call.requested).isEqualTo(3);
    listener.onHalfClose();
    assertThat(call.events).containsExactly("headers", "message", "message", "close OK");
    assertThat(stream.get().heard).containsExactly("message", "message", "completed");
  }

  @Test
  void aCancelReachesTheStreamAsTheSharedExceptionAndLaterRepliesAreRefused() {
    RecordingCall call = new RecordingCall();
    ServerCall.Listener<ProcessingRequest> listener = handler.startCall(call, new Metadata());
    listener.onMessage(ProcessingRequest.getDefaultInstance());
    listener.onCancel();

    assertThat(stream.get().heard).hasSize(2).last().isSameAs(ExchangeCallHandler.CANCELLED);
    assertThat(ExchangeCallHandler.CANCELLED.getStatus().getCode()).isEqualTo(Status.Code.CANCELLED);
    assertThat(ExchangeCallHandler.CANCELLED.getStackTrace()).isEmpty();
    assertThatThrownBy(() -> stream.get().out.onNext(ProcessingResponse.getDefaultInstance()))
        .isInstanceOf(StatusRuntimeException.class)
        .isSameAs(ExchangeCallHandler.CANCELLED);
    stream.get().out.onCompleted(); // nothing to close: the call is gone
    assertThat(call.events).containsExactly("headers", "message");
  }

  @Test
  void anErrorClosesTheCallWithItsStatusOnce() {
    RecordingCall call = new RecordingCall();
    handler.startCall(call, new Metadata());
    stream.get().out.onError(Status.INTERNAL.asRuntimeException());
    stream.get().out.onCompleted();
    assertThat(call.events).containsExactly("close INTERNAL");
  }
}
