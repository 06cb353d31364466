package io.disaggusage.extproc.tools;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.stream.ExtProcService;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.store.MemoryContextUsageStore;
import io.disaggusage.extproc.warmup.Warmup;
import io.disaggusage.extproc.warmup.WarmupStack;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * The ext_proc service inside this process for the {@code demo} and {@code replay} commands: the real
 * {@link ExtProcService} with the memory store, warmed up as the server warms up, on an ephemeral
 * loopback port (real gRPC over HTTP/2, nothing listening beyond 127.0.0.1), with a plaintext channel to
 * it. No admin port and no Redis: nothing outside the process sees it.
 */
public final class LocalService implements AutoCloseable {
  private final ScheduledExecutorService timer;
  private final MemoryContextUsageStore store;
  private final Metrics metrics = Metrics.standalone();
  private final Server server;
  private final ManagedChannel channel;

  private LocalService(Config config) throws IOException {
    timer =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "disagg-usage-local-timer");
              t.setDaemon(true);
              return t;
            });
    store = new MemoryContextUsageStore(config.store().ttl(), config.store().maxEntries(), timer);
    ExtProcService service = new ExtProcService(config, store, metrics, timer);
    int maxInbound = config.grpc().maxInboundMessageBytes();
    Warmup warmup = Warmup.run(config, timer, WarmupStack.loopback(maxInbound));
    try {
      server =
          NettyServerBuilder.forAddress(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))
              .maxInboundMessageSize(maxInbound)
              .addService(service)
              .build()
              .start();
    } catch (IOException | RuntimeException e) {
      store.close();
      timer.shutdownNow();
      throw e;
    } finally {
      warmup.close(); // after the server started, which takes over the warmed threads
    }
    channel =
        NettyChannelBuilder.forAddress(new InetSocketAddress(InetAddress.getLoopbackAddress(), server.getPort()))
            .usePlaintext()
            .build();
  }

  /**
   * Starts the service with {@code config} ({@code grpc.*} listener settings, {@code admin.*} and
   * {@code store.type} do not apply) and connects to it.
   */
  public static LocalService start(Config config) throws IOException {
    LocalService service = new LocalService(config);
    // Connected now, so the first exchange's message timer does not include the connect.
    Channels.awaitReady(service.channel, Duration.ofSeconds(5));
    return service;
  }

  /** A plaintext channel to the service. */
  public ManagedChannel channel() {
    return channel;
  }

  /** The loopback port the service listens on. */
  public int port() {
    return server.getPort();
  }

  public Metrics metrics() {
    return metrics;
  }

  @Override
  public void close() {
    channel.shutdownNow();
    server.shutdownNow();
    try {
      channel.awaitTermination(2, TimeUnit.SECONDS);
      server.awaitTermination(2, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    store.close();
    timer.shutdownNow();
  }
}
