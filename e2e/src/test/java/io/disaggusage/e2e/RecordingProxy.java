package io.disaggusage.e2e;

import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.services.HealthStatusManager;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A transparent ext_proc hop between an Envoy (real or emulated) and the service process: every
 * {@code Process} stream is forwarded message by message and recorded, so a test can compare what the
 * service received from real Envoy with what it received from the emulation. It answers gRPC health
 * itself (SERVING), so Envoy's health check of the cluster passes.
 */
final class RecordingProxy implements AutoCloseable {
  /** One ext_proc stream as the service saw it. */
  record Recorded(List<ProcessingRequest> requests, List<ProcessingResponse> responses) {}

  private final ManagedChannel upstream;
  private final Server server;
  private final List<Recorded> streams = Collections.synchronizedList(new ArrayList<>());

  RecordingProxy(int servicePort) {
    upstream = NettyChannelBuilder.forAddress("127.0.0.1", servicePort).usePlaintext().build();
    HealthStatusManager health = new HealthStatusManager();
    health.setStatus("envoy.service.ext_proc.v3.ExternalProcessor", ServingStatus.SERVING);
    try {
      server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
          .addService(new Forwarder())
          .addService(health.getHealthService())
          .maxInboundMessageSize(64 * 1024 * 1024)
          .build()
          .start();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  int port() {
    return server.getPort();
  }

  /** A channel to this proxy, for an emulated Envoy. */
  ManagedChannel channel() {
    return NettyChannelBuilder.forAddress("127.0.0.1", port()).usePlaintext().build();
  }

  /** How many streams were recorded since the last {@link #drain}. */
  int peek() {
    return streams.size();
  }

  /** The streams recorded since the last call, oldest first, and forgets them. */
  List<Recorded> drain() {
    synchronized (streams) {
      List<Recorded> copy = List.copyOf(streams);
      streams.clear();
      return copy;
    }
  }

  private final class Forwarder extends ExternalProcessorGrpc.ExternalProcessorImplBase {
    @Override
    public StreamObserver<ProcessingRequest> process(StreamObserver<ProcessingResponse> envoy) {
      Recorded recorded = new Recorded(Collections.synchronizedList(new ArrayList<>()), Collections.synchronizedList(new ArrayList<>()));
      streams.add(recorded);
      StreamObserver<ProcessingRequest> service = ExternalProcessorGrpc.newStub(upstream).process(new StreamObserver<>() {
        @Override
        public void onNext(ProcessingResponse value) {
          recorded.responses().add(value);
          synchronized (envoy) {
            envoy.onNext(value);
          }
        }

        @Override
        public void onError(Throwable t) {
          synchronized (envoy) {
            envoy.onError(t);
          }
        }

        @Override
        public void onCompleted() {
          synchronized (envoy) {
            envoy.onCompleted();
          }
        }
      });
      return new StreamObserver<>() {
        @Override
        public void onNext(ProcessingRequest value) {
          recorded.requests().add(value);
          synchronized (service) {
            service.onNext(value);
          }
        }

        @Override
        public void onError(Throwable t) {
          synchronized (service) {
            service.onError(t);
          }
        }

        @Override
        public void onCompleted() {
          synchronized (service) {
            service.onCompleted();
          }
        }
      };
    }
  }

  @Override
  public void close() throws InterruptedException {
    server.shutdownNow().awaitTermination(2, TimeUnit.SECONDS);
    upstream.shutdownNow().awaitTermination(2, TimeUnit.SECONDS);
  }
}
