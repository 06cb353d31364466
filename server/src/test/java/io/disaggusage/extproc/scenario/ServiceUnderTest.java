package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.ShippedEnvoyConfig;
import io.disaggusage.extproc.testkit.EngineRequests;
import com.github.benmanes.caffeine.cache.Ticker;
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
import io.grpc.ServerInterceptors;
import io.grpc.ServerServiceDefinition;
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
  /**
   * The fake Envoy's {@code message_timeout}, and the service's {@code grpc.envoy_message_timeout}, where
   * a test does not choose its own; see {@link #withTestMessageTimeout}.
   */
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

  /** The in-process store on the system clock. */
  public static final StoreFactory MEMORY_STORE = memoryStore(Ticker.systemTicker());

  /** The in-process store on {@code clock}. */
  public static StoreFactory memoryStore(Ticker clock) {
    return (config, timer) ->
        new MemoryContextUsageStore(config.store().ttl(), config.store().maxEntries(), timer, clock);
  }

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
  /**
   * The clock of the fixture's own memory store (the one every fixture uses unless given a store
   * factory); see {@link #passStoreTtl()}.
   */
  private final SkippableTicker storeClock;
  public final FakeEnvoy envoy;
  private final StreamEnds streamEnds = new StreamEnds();
  private final Server server;
  private final ManagedChannel channel;

  public ServiceUnderTest(Config config, Transport transport, EnvoyProfile profile) throws Exception {
    this(config, transport, profile, ExtProcService::new);
  }

  /** The service the factory makes, on the fixture's own memory store. */
  public ServiceUnderTest(
      Config config, Transport transport, EnvoyProfile profile, ServiceFactory factory)
      throws Exception {
    this(config, transport, profile, new SkippableTicker(), factory);
  }

  private ServiceUnderTest(
      Config config, Transport transport, EnvoyProfile profile, SkippableTicker storeClock, ServiceFactory factory)
      throws Exception {
    this(config, transport, profile, storeClock, memoryStore(storeClock), factory);
  }

  public ServiceUnderTest(
      Config config, Transport transport, EnvoyProfile profile, StoreFactory stores, ServiceFactory factory)
      throws Exception {
    this(config, transport, profile, new SkippableTicker(), stores, factory);
  }

  private ServiceUnderTest(
      Config config,
      Transport transport,
      EnvoyProfile profile,
      SkippableTicker storeClock,
      StoreFactory stores,
      ServiceFactory factory)
      throws Exception {
    config = withTestMessageTimeout(config);
    this.config = config;
    this.storeClock = storeClock;
    this.store = stores.open(config, timer);
    ServerServiceDefinition service =
        ServerInterceptors.intercept(factory.create(config, store, metrics, timer), streamEnds);
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
    ExchangeLedger.serve(envoy, metrics);
  }

  public ServiceUnderTest(Config config) throws Exception {
    this(config, Transport.IN_PROCESS, EnvoyProfile.V1_37);
  }

  /**
   * Waits until every ext_proc stream the service accepted so far is over on the service's side, so
   * what it does at a stream's end (gauges, waiters, counts) is done.
   */
  public void awaitStreamsEnded() throws InterruptedException {
    streamEnds.awaitAllEnded(Duration.ofSeconds(5));
  }

  /**
   * Moves the fixture's own memory store past its TTL at once and lets it drop what expired: every
   * entry put so far is gone. Only for a fixture made without a {@link StoreFactory}.
   */
  public void passStoreTtl() {
    storeClock.skip(config.store().ttl().plusNanos(1));
    ((MemoryContextUsageStore) store).cleanUp();
  }

  /** Defaults plus the test clusters and a short context wait. */
  public static Config testConfig(Duration contextWait) {
    Config d = Config.defaults();
    return new Config(
        d.grpc(),
        d.admin(),
        new Config.Classification(
            List.of(CONTEXT_CLUSTER), List.of(GENERATION_CLUSTER), d.classification().paths(), true, false,
            d.classification().phaseHeader()),
        new Config.Ordering(contextWait, Config.Fallback.PASSTHROUGH, true),
        d.store(),
        d.metadata(),
        d.limits(),
        d.metrics(),
        d.logging(),
        d.shutdown(), d.streaming(), d.edgeGuard());
  }

  public static Config testConfig() {
    return testConfig(Duration.ofMillis(1500));
  }

  /** {@code config} with {@code ordering.clamp_without_context} off. */
  public static Config withoutClamp(Config config) {
    Config.Ordering o = config.ordering();
    return new Config(
        config.grpc(),
        config.admin(),
        config.classification(),
        new Config.Ordering(o.contextWait(), o.fallback(), false),
        config.store(),
        config.metadata(),
        config.limits(),
        config.metrics(),
        config.logging(),
        config.shutdown(),
        config.streaming(), config.edgeGuard());
  }

  /**
   * {@code config} with {@code grpc.envoy_message_timeout} raised to {@link #TEST_MESSAGE_TIMEOUT_MILLIS}
   * where it is the shipped 200 ms; a timeout a test chose stays. A test machine can stall for longer
   * than Envoy's 200 ms (CPU contention on a 2-core CI box), which would fail an exchange open, and count
   * it {@code envoy_gave_up}, for a reason that is not the service's.
   */
  public static Config withTestMessageTimeout(Config config) {
    Config.Grpc g = config.grpc();
    if (!g.envoyMessageTimeout().equals(Config.defaults().grpc().envoyMessageTimeout())) {
      return config;
    }
    return new Config(
        new Config.Grpc(g.port(), g.maxInboundMessageBytes(), g.listen(), g.keepaliveTime(), g.keepaliveTimeout(),
            g.permitKeepaliveTime(), g.maxConcurrentStreams(), g.maxConnectionIdle(),
            Duration.ofMillis(TEST_MESSAGE_TIMEOUT_MILLIS), g.tls()),
        config.admin(), config.classification(), config.ordering(), config.store(), config.metadata(),
        config.limits(), config.metrics(), config.logging(), config.shutdown(), config.streaming(), config.edgeGuard());
  }

  /**
   * The filter configuration users deploy, read from {@code deploy/envoy/envoy.yaml}, with the {@code
   * message_timeout} the service is told ({@code grpc.envoy_message_timeout}), as an operator keeps the
   * two equal. The service's context wait must stay below the shipped {@code max_message_timeout}: the
   * timer mechanics ({@code override_message_timeout} up to {@code max_message_timeout}) are exercised
   * as shipped, since every deferred reply asks for an extension.
   */
  public static ExternalProcessor shippedFilterConfig(Config config) {
    ExternalProcessor shipped = ShippedEnvoyConfig.extProcFilter();
    long ceiling = com.google.protobuf.util.Durations.toMillis(shipped.getMaxMessageTimeout());
    if (config.ordering().contextWait().toMillis() >= ceiling) {
      throw new IllegalArgumentException("context wait must stay below the shipped max_message_timeout");
    }
    return shipped.toBuilder()
        .setMessageTimeout(com.google.protobuf.util.Durations.fromMillis(config.grpc().envoyMessageTimeout().toMillis()))
        .build();
  }

  @Override
  public void close() throws Exception {
    ExchangeLedger.retire(envoy);
    envoy.close();
    channel.shutdownNow().awaitTermination(2, TimeUnit.SECONDS);
    server.shutdownNow().awaitTermination(2, TimeUnit.SECONDS);
    store.close();
    timer.shutdownNow();
  }
}
