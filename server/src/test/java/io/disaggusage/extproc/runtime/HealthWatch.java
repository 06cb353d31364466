package io.disaggusage.extproc.runtime;

import io.grpc.Channel;
import io.grpc.Status;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A gRPC health Watch as a prober holds one: every status in the order it came, a future per status that
 * completes when it is first seen, and the call's end. Optionally the prober, on seeing NOT_SERVING,
 * does something while the server drains (this watch is then one of its in-flight streams) and hangs up.
 */
final class HealthWatch {
  private final List<ServingStatus> seen = new CopyOnWriteArrayList<>();
  private final Map<ServingStatus, CompletableFuture<Void>> first = new ConcurrentHashMap<>();
  private final CompletableFuture<Status> ended = new CompletableFuture<>();

  private HealthWatch() {}

  /** Watches {@code service} until the server ends the call. */
  static HealthWatch open(Channel channel, String service) {
    return open(channel, service, null);
  }

  /**
   * Watches {@code service}; on NOT_SERVING runs {@code whileDraining} on the call's thread, then
   * cancels the call.
   */
  static HealthWatch untilNotServing(Channel channel, String service, Runnable whileDraining) {
    return open(channel, service, whileDraining);
  }

  private static HealthWatch open(Channel channel, String service, Runnable onNotServing) {
    HealthWatch watch = new HealthWatch();
    HealthGrpc.newStub(channel)
        .watch(
            HealthCheckRequest.newBuilder().setService(service).build(),
            new ClientResponseObserver<HealthCheckRequest, HealthCheckResponse>() {
              private ClientCallStreamObserver<HealthCheckRequest> call;

              @Override
              public void beforeStart(ClientCallStreamObserver<HealthCheckRequest> requestStream) {
                call = requestStream;
              }

              @Override
              public void onNext(HealthCheckResponse response) {
                ServingStatus status = response.getStatus();
                watch.seen.add(status);
                if (onNotServing != null && status == ServingStatus.NOT_SERVING) {
                  onNotServing.run();
                  call.cancel("prober saw NOT_SERVING", null);
                }
                watch.saw(status).complete(null);
              }

              @Override
              public void onError(Throwable t) {
                watch.ended.complete(Status.fromThrowable(t));
              }

              @Override
              public void onCompleted() {
                watch.ended.complete(Status.OK);
              }
            });
    return watch;
  }

  private CompletableFuture<Void> saw(ServingStatus status) {
    return first.computeIfAbsent(status, s -> new CompletableFuture<>());
  }

  /** Waits until {@code status} has come; fails when it has not within {@code limit}. */
  void await(ServingStatus status, Duration limit) throws Exception {
    try {
      saw(status).get(limit.toNanos(), TimeUnit.NANOSECONDS);
    } catch (TimeoutException e) {
      throw new AssertionError("no " + status + " within " + limit + "; saw " + seen, e);
    }
  }

  /** Every status so far, in order. */
  List<ServingStatus> seen() {
    return List.copyOf(seen);
  }

  /** Completes with how the call ended: OK when the server completed it, else its error status. */
  CompletableFuture<Status> ended() {
    return ended;
  }
}
