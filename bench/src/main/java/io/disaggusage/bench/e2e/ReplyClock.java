package io.disaggusage.bench.e2e;

import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall.SimpleForwardingClientCall;
import io.grpc.ForwardingClientCallListener.SimpleForwardingClientCallListener;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.LongAdder;

/**
 * Measures, on the driver's side of the gRPC channel, the time from handing a {@code response_body}
 * message to gRPC until its reply arrives. Replies to body messages come back in message order, so
 * each call pairs them first in, first out; a timer extension ({@code override_message_timeout})
 * is not a reply and is ignored.
 */
public final class ReplyClock implements ClientInterceptor {
  private final LatencyHistogram latency = new LatencyHistogram();
  private final LongAdder replies = new LongAdder();

  public LatencyHistogram latency() {
    return latency;
  }

  /** Response-body replies received since the last {@link #reset}. */
  public long replies() {
    return replies.sum();
  }

  public void reset() {
    latency.reset();
    replies.reset();
  }

  @Override
  @SuppressWarnings("unchecked")
  public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
    ConcurrentLinkedQueue<Long> sent = new ConcurrentLinkedQueue<>();
    return new SimpleForwardingClientCall<>(next.newCall(method, options)) {
      @Override
      public void start(Listener<R> listener, Metadata headers) {
        super.start(
            new SimpleForwardingClientCallListener<>(listener) {
              @Override
              public void onMessage(R message) {
                if (((ProcessingResponse) message).hasResponseBody()) {
                  Long at = sent.poll();
                  if (at != null) {
                    latency.record(System.nanoTime() - at);
                    replies.increment();
                  }
                }
                super.onMessage(message);
              }
            },
            headers);
      }

      @Override
      public void sendMessage(Q message) {
        if (((ProcessingRequest) message).hasResponseBody()) {
          sent.add(System.nanoTime());
        }
        super.sendMessage(message);
      }
    };
  }
}
