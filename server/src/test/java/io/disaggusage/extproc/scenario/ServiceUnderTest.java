package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.ShippedEnvoyConfig;
import io.disaggusage.extproc.testkit.EngineRequests;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.stream.ExtProcService;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.store.ContextUsageStore;
import io.disaggusage.extproc.store.MemoryContextUsageStore;
import io.disaggusage.extproc.emulator.envoy.EnvoyProfile;
import io.disaggusage.extproc.emulator.envoy.FakeEnvoy;
import io.disaggusage.extproc.warmup.Warmup;
import io.disaggusage.extproc.warmup.WarmupStack;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.grpc.BindableService;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * The real ext_proc service behind a real gRPC transport, driven by the fake Envoy with the filter
 * configuration the project ships in {@code deploy/envoy/envoy.yaml}.
 */
public final class ServiceUnderTest implements AutoCloseable {
  /** The per-message timeout the fake Envoy uses; see {@link #shippedFilterConfig}. */
  static final long TEST_MESSAGE_TIMEOUT_MILLIS = 1000;

  public static final String CONTEXT_CLUSTER = EngineRequests.CONTEXT_CLUSTER;
  public static final String GENERATION_CLUSTER = EngineRequests.GENERATION_CLUSTER;

  /** Builds the gRPC service under test from the fixture's parts. */
  @FunctionalInterface
  public interface ServiceFactory {
    BindableService create(
        Config config, ContextUsageStore store, Metrics metrics, ScheduledExecutorService timer);
  }

  /** Opens the store the service under test uses (the memory store unless a test says otherwise). */
  @FunctionalInterface
  public interface StoreFactory {
    ContextUsageStore open(Config config, ScheduledExecutorService timer);
  }

  /** The store every fixture uses unless told otherwise: the in-process one. */
  public static final StoreFactory MEMORY_STORE =
      (config, timer) -> new MemoryContextUsageStore(config.store().ttl(), config.store().maxEntries(), timer);

  /** Which gRPC transport carries the ext_proc stream. */
  public enum Transport {
    IN_PROCESS,
    NETTY_LOOPBACK
  }

  static {
    // As the server does at start-up: a cold JVM's first exchange can exceed Envoy's message timeout.
    var timer = Executors.newSingleThreadScheduledExecutor();
    Config defaults = Config.defaults();
    Warmup.run(defaults, timer, WarmupStack.loopback(defaults.grpc().maxInboundMessageBytes())).close();
    timer.shutdownNow();
  }

  public final Config config;
  public final Metrics metrics = Metrics.standalone();
  public final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
  public final ContextUsageStore store;
  public final FakeEnvoy envoy;
  private final Server server;
  private final ManagedChannel channel;

  public ServiceUnderTest(Config config, Transport transport, EnvoyProfile profile) throws Exception {
    this(config, transport, profile, ExtProcService::new);
  }

  public ServiceUnderTest(
      Config config, Transport transport, EnvoyProfile profile, ServiceFactory factory)
      throws Exception {
    this(config, transport, profile, MEMORY_STORE, factory);
  }

  public ServiceUnderTest(
      Config config, Transport transport, EnvoyProfile profile, StoreFactory stores, ServiceFactory factory)
      throws Exception {
    this.config = config;
    this.store = stores.open(config, timer);
    BindableService service = factory.create(config, store, metrics, timer);
    if (transport == Transport.IN_PROCESS) {
      String name = InProcessServerBuilder.generateName();
      server = InProcessServerBuilder.forName(name).addService(service).build().start();
      channel = InProcessChannelBuilder.forName(name).build();
    } else {
      server =
          NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
              .addService(service)
              .maxInboundMessageSize(config.grpc().maxInboundMessageBytes())
              .build()
              .start();
      channel =
          NettyChannelBuilder.forAddress("127.0.0.1", server.getPort()).usePlaintext().build();
    }
    envoy = FakeEnvoy.builder(channel).config(shippedFilterConfig(config)).profile(profile).build();
  }

  public ServiceUnderTest(Config config) throws Exception {
    this(config, Transport.IN_PROCESS, EnvoyProfile.V1_37);
  }

  /** Defaults plus the test clusters and a short context wait. */
  public static Config testConfig(Duration contextWait) {
    Config d = Config.defaults();
    return new Config(
        d.grpc(),
        d.admin(),
        new Config.Classification(
            List.of(CONTEXT_CLUSTER), List.of(GENERATION_CLUSTER), d.classification().paths(), true, false),
        new Config.Ordering(contextWait, Config.Fallback.PASSTHROUGH),
        d.store(),
        d.metadata(),
        d.limits(),
        d.metrics(),
        d.logging(),
        d.shutdown(), d.streaming());
  }

  public static Config testConfig() {
    return testConfig(Duration.ofMillis(1500));
  }

  /**
   * The filter configuration users deploy: read from {@code deploy/envoy/envoy.yaml}. The service's
   * context wait must stay below the shipped {@code max_message_timeout}.
   */
  public static ExternalProcessor shippedFilterConfig(Config config) {
    ExternalProcessor shipped = ShippedEnvoyConfig.extProcFilter();
    long ceiling = com.google.protobuf.util.Durations.toMillis(shipped.getMaxMessageTimeout());
    if (config.ordering().contextWait().toMillis() >= ceiling) {
      throw new IllegalArgumentException("context wait must stay below the shipped max_message_timeout");
    }
    // Everything but the per-message timeout is taken as shipped. A test machine can stall for longer
    // than Envoy's 200 ms (CPU contention on a 2-core CI box), which would fail an exchange open for a
    // reason that is not the service's; the timer *mechanics* (override_message_timeout up to
    // max_message_timeout) are still exercised, since every deferred reply asks for an extension.
    long shippedTimeout = com.google.protobuf.util.Durations.toMillis(shipped.getMessageTimeout());
    return shipped.toBuilder()
        .setMessageTimeout(com.google.protobuf.util.Durations.fromMillis(Math.max(shippedTimeout, TEST_MESSAGE_TIMEOUT_MILLIS)))
        .build();
  }

  @Override
  public void close() throws Exception {
    envoy.close();
    channel.shutdownNow().awaitTermination(2, TimeUnit.SECONDS);
    server.shutdownNow().awaitTermination(2, TimeUnit.SECONDS);
    store.close();
    timer.shutdownNow();
  }
}
