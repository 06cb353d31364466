package io.disaggusage.bench.e2e;

import com.google.protobuf.util.Durations;
import io.disaggusage.extproc.testkit.ShippedEnvoyConfig;
import io.disaggusage.extproc.emulator.envoy.EnvoyProfile;
import io.disaggusage.extproc.emulator.envoy.FakeEnvoy;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.grpc.BindableService;
import io.grpc.ClientInterceptors;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.IoHandlerFactory;
import io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.ServerChannel;
import io.grpc.netty.shaded.io.netty.channel.epoll.Epoll;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollIoHandler;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollServerSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.nio.NioIoHandler;
import io.grpc.netty.shaded.io.netty.channel.socket.nio.NioServerSocketChannel;
import io.grpc.netty.shaded.io.netty.util.concurrent.DefaultThreadFactory;
import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;

/**
 * One ext_proc server on a loopback Netty listener, the fake Envoy driving it through a
 * {@link ReplyClock}, and a {@link LeanEnvoy} on a connection of its own. The handlers run on the
 * server's Netty event loops, as in the service's own listener; every server thread is named {@code threadPrefix-…}, so its CPU time can be told apart from the driver's.
 */
final class Target implements AutoCloseable {
  /** The shipped filter settings with a message timeout no run comes near (timeouts are counted). */
  static final long MESSAGE_TIMEOUT_SECONDS = 10;

  final String name;
  final String threadPrefix;
  final ReplyClock clock = new ReplyClock();
  final FakeEnvoy envoy;
  final LeanEnvoy lean;
  private final Server server;
  private final ManagedChannel channel;
  private final ManagedChannel leanChannel;
  private final EventLoopGroup boss;
  private final EventLoopGroup workers;
  private final AutoCloseable owned;

  Target(String name, BindableService service, AutoCloseable owned) throws Exception {
    this.name = name;
    this.threadPrefix = "bench-" + name + "-";
    this.owned = owned;
    boolean epoll = Epoll.isAvailable();
    IoHandlerFactory io = epoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory();
    Class<? extends ServerChannel> channelType = epoll ? EpollServerSocketChannel.class : NioServerSocketChannel.class;
    boss = new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory(threadPrefix + "boss", true), io);
    workers = new MultiThreadIoEventLoopGroup(0, new DefaultThreadFactory(threadPrefix + "netty", true), io);
    server =
        NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
            .channelType(channelType)
            .bossEventLoopGroup(boss)
            .workerEventLoopGroup(workers)
            .directExecutor() // as the service's own listener runs its handlers
            .maxInboundMessageSize(64 * 1024 * 1024)
            .addService(service)
            .build()
            .start();
    channel = NettyChannelBuilder.forAddress("127.0.0.1", server.getPort()).usePlaintext().build();
    leanChannel = NettyChannelBuilder.forAddress("127.0.0.1", server.getPort()).usePlaintext().build();
    lean = new LeanEnvoy(leanChannel);
    ExternalProcessor filter =
        ShippedEnvoyConfig.extProcFilter().toBuilder()
            .setMessageTimeout(Durations.fromSeconds(MESSAGE_TIMEOUT_SECONDS))
            .setMaxMessageTimeout(Durations.fromSeconds(2 * MESSAGE_TIMEOUT_SECONDS))
            .build();
    envoy =
        FakeEnvoy.builder(ClientInterceptors.intercept(channel, clock))
            .config(filter)
            .profile(EnvoyProfile.V1_37)
            .build();
  }

  @Override
  public void close() throws Exception {
    envoy.close();
    channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    leanChannel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    boss.shutdownGracefully(0, 1, TimeUnit.SECONDS);
    workers.shutdownGracefully(0, 1, TimeUnit.SECONDS);
    if (owned != null) {
      owned.close();
    }
  }
}
