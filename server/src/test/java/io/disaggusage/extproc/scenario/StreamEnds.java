package io.disaggusage.extproc.scenario;

import io.grpc.ForwardingServerCallListener.SimpleForwardingServerCallListener;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Tells when the server's calls are over. A call is over once its listener's last callback (complete or
 * cancel) has returned: gRPC runs one call's callbacks in order, so by then the service has seen the
 * half-close or the reset and done what it does at a stream's end (metrics, waiters, counts).
 */
final class StreamEnds implements ServerInterceptor {
  private final Set<CompletableFuture<Void>> open = ConcurrentHashMap.newKeySet();

  @Override
  public <Q, R> ServerCall.Listener<Q> interceptCall(
      ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
    CompletableFuture<Void> ended = new CompletableFuture<>();
    open.add(ended);
    return new SimpleForwardingServerCallListener<>(next.startCall(call, headers)) {
      @Override
      public void onComplete() {
        try {
          super.onComplete();
        } finally {
          end(ended);
        }
      }

      @Override
      public void onCancel() {
        try {
          super.onCancel();
        } finally {
          end(ended);
        }
      }
    };
  }

  private void end(CompletableFuture<Void> ended) {
    open.remove(ended);
    ended.complete(null);
  }

  /** Waits until every call accepted so far is over. */
  void awaitAllEnded(Duration timeout) throws InterruptedException {
    try {
      CompletableFuture.allOf(open.toArray(CompletableFuture[]::new)).get(timeout.toNanos(), TimeUnit.NANOSECONDS);
    } catch (ExecutionException | TimeoutException e) {
      throw new AssertionError("streams still open after " + timeout + ": " + open.size(), e);
    }
  }
}
