package io.disaggusage.extproc.warmup;

import io.grpc.BindableService;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;

/**
 * The gRPC server stack a {@link Warmup} runs its exchanges through: a server built like the one that
 * will serve Envoy (transport, event loops, executor, settings, services), but on an address nothing
 * outside this process reaches, and client channels to it over the same transport.
 */
public interface WarmupStack {
  /** Builds and starts the private server, serving {@code extProc} and {@code health}. */
  Server start(BindableService extProc, BindableService health) throws IOException;

  /** A new client channel (one HTTP/2 connection) to {@code server}. */
  ManagedChannel connect(Server server);

  /** Cleans up after the server and channels have stopped (a temporary socket file, say). */
  default void close() {}

  /**
   * Netty's default transport on an ephemeral {@code 127.0.0.1} port, plaintext, with grpc-java's default
   * settings: for services that are themselves built that way (the {@code demo} and {@code replay}
   * commands, tests).
   */
  static WarmupStack loopback(int maxInboundMessageBytes) {
    return new WarmupStack() {
      @Override
      public Server start(BindableService extProc, BindableService health) throws IOException {
        return NettyServerBuilder.forAddress(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))
            .maxInboundMessageSize(maxInboundMessageBytes)
            .addService(extProc)
            .addService(health)
            .build()
            .start();
      }

      @Override
      public ManagedChannel connect(Server server) {
        return NettyChannelBuilder.forAddress(new InetSocketAddress(InetAddress.getLoopbackAddress(), server.getPort()))
            .usePlaintext()
            .build();
      }
    };
  }
}
