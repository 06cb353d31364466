package io.disaggusage.extproc.runtime;

import io.disaggusage.extproc.Version;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.config.ConfigLoader;
import io.disaggusage.extproc.edgeguard.EdgeGuardService;
import io.disaggusage.extproc.metrics.EdgeGuardMetrics;
import io.disaggusage.extproc.stream.ExtProcService;
import io.disaggusage.extproc.logtext.LogText;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.otel.OtlpMetricsExport;
import io.disaggusage.extproc.store.ContextUsageStore;
import io.disaggusage.extproc.store.MemoryContextUsageStore;
import io.disaggusage.extproc.store.RedisContextUsageStore;
import io.disaggusage.extproc.warmup.Warmup;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.grpc.BindableService;
import io.grpc.Server;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.services.HealthStatusManager;
import io.grpc.protobuf.services.ProtoReflectionServiceV1;
import io.prometheus.metrics.instrumentation.jvm.JvmMetrics;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.SocketAddress;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The running service: owns the timer, the context usage store, the gRPC server (ext_proc,
 * grpc.health.v1, reflection) and the HTTP admin server, and starts and stops them in order.
 *
 * <p>Start order: timer, store, {@link ExtProcService}, gRPC listener ({@link GrpcListener}: TCP or Unix
 * socket, plaintext or TLS), the {@link Warmup} through its private twin ({@link PrivateListener}), gRPC
 * server (health SERVING once it listens), admin server. {@link #close()}
 * drains: health NOT_SERVING (for {@code ""} and the ext_proc service) and readiness 503, stop accepting
 * connections and streams, let in-flight streams finish for up to {@code shutdown.drain_timeout} then
 * cancel them, then stop the listener's resources, the admin server, the store and the timer. {@code
 * close()} is idempotent and safe to call from a shutdown hook and another thread at once.
 */
public final class ServerRuntime implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(ServerRuntime.class);

  /** How long {@link #close()} waits for cancelled streams to end after the drain timeout. */
  private static final Duration CANCEL_GRACE = Duration.ofSeconds(2);

  /** The longest the edge role reads synthetic bodies before it serves. */
  private static final Duration EDGE_WARMUP = Duration.ofMillis(400);

  /** Name of the single daemon thread that runs every deadline (store waits, ext_proc timers). */
  public static final String TIMER_THREAD_NAME = "disagg-usage-timer";

  /** The gRPC health service names reported SERVING while the server runs. */
  public static final String EXT_PROC_SERVICE_NAME = ExternalProcessorGrpc.SERVICE_NAME;

  private final Config config;
  private final Metrics metrics;
  private final AtomicBoolean closing = new AtomicBoolean();
  private final CountDownLatch terminated = new CountDownLatch(1);

  private ScheduledExecutorService timer;
  private ContextUsageStore store;
  private HealthStatusManager health;
  private GrpcListener listener;
  private Server grpcServer;
  private AdminServer adminServer;
  private OtlpMetricsExport otlp;
  private volatile boolean serving;
  private Duration startupTime = Duration.ZERO;

  private ServerRuntime(Config config, Metrics metrics) {
    this.config = config;
    this.metrics = metrics;
  }

  /** Starts the service with a fresh metrics registry (service metrics plus JVM metrics). */
  public static ServerRuntime start(Config config) throws StartupException {
    return start(config, new Metrics(new PrometheusRegistry(), config.metrics()));
  }

  /**
   * Starts the service, exposing {@code metrics} on {@code /metrics}. The runtime adds the store-size gauge
   * and the JVM metrics to {@code metrics.registry()}, so use one {@link Metrics} per runtime.
   *
   * @throws StartupException when a port cannot be bound or the configured store is unavailable; anything
   *     already started has been stopped again
   */
  public static ServerRuntime start(Config config, Metrics metrics) throws StartupException {
    ServerRuntime runtime = new ServerRuntime(config, metrics);
    try {
      runtime.startAll();
    } catch (StartupException | RuntimeException e) {
      runtime.closeQuietly();
      throw e;
    }
    return runtime;
  }

  private void startAll() throws StartupException {
    long begin = System.nanoTime();
    timer = newTimer();
    // The edge guard keeps no usage: a store it never uses must not connect to Redis.
    store =
        config.edgeGuard().enabled()
            ? new MemoryContextUsageStore(config.store().ttl(), 1, timer)
            : openStore(config.store(), timer);
    metrics.registerStoreSize(store::size);
    metrics.registerStoreReady(store::isReady);
    log.debug("store {} open after {} ms", config.store().type(), millisSince(begin));
    Config.Otlp otlpConfig = config.metrics().otlp();
    if (otlpConfig.enabled()) {
      otlp = OtlpMetricsExport.start(otlpConfig);
      metrics.alsoTo(otlp);
      log.info("pushing OpenTelemetry metrics over OTLP/HTTP to {} every {}", LogText.withoutCredentials(otlpConfig.endpoint()),
          ConfigLoader.formatDuration(otlpConfig.interval()));
    }
    // The JVM collectors take 60-130 ms to set up (MXBean lookups): registered on a thread of their own
    // beside the warm-up, and awaited before /metrics opens, so no scrape sees the service without them.
    CompletableFuture<Void> jvmMetrics =
        CompletableFuture.runAsync(() -> JvmMetrics.builder().register(metrics.registry()), ServerRuntime::daemonThread);

    health = new HealthStatusManager();
    health.setStatus(HealthStatusManager.SERVICE_NAME_ALL_SERVICES, ServingStatus.NOT_SERVING);
    health.setStatus(EXT_PROC_SERVICE_NAME, ServingStatus.NOT_SERVING);
    BindableService extProc =
        config.edgeGuard().enabled() ? edgeGuard(begin) : new ExtProcService(config, store, metrics, timer);
    listener = GrpcListener.prepare(config.grpc());
    try (Warmup warmup = Warmup.run(config, timer, new PrivateListener(listener, this::withServices))) {
      logWarmup(warmup.result(), begin);
      grpcServer = withServices(listener.serverBuilder(), extProc, health.getHealthService()).build();
      try {
        grpcServer.start();
      } catch (IOException e) {
        throw new StartupException(listener.bindFailure(e), e);
      }
    } // closed once the real server holds the threads the warm-up started (see Warmup)
    listener.started();
    serving = true;
    health.setStatus(HealthStatusManager.SERVICE_NAME_ALL_SERVICES, ServingStatus.SERVING);
    health.setStatus(EXT_PROC_SERVICE_NAME, ServingStatus.SERVING);
    log.debug("gRPC server listening after {} ms", millisSince(begin));

    jvmMetrics.join(); // uninterruptible; a registration failure fails the start
    log.debug("JVM metrics registered after {} ms", millisSince(begin));
    int adminPort = config.admin().port();
    try {
      adminServer = AdminServer.start(adminPort, metrics.registry(), this::notReadyReason);
    } catch (IOException e) {
      throw new StartupException(
          "admin.port " + adminPort + ": cannot listen: " + GrpcListener.bindProblem(e), e);
    }
    startupTime = Duration.ofNanos(System.nanoTime() - begin);
    log.info(
        "disagg-usage-extproc {} started in {} ms (JVM uptime {} ms): grpc {}, admin port {}, {}",
        Version.current(),
        startupTime.toMillis(),
        ManagementFactory.getRuntimeMXBean().getUptime(),
        listener.describe(grpcServer),
        adminPort(),
        config.edgeGuard().enabled()
            ? "role edge guard"
            : "store " + config.store().type().name().toLowerCase(Locale.ROOT));
  }

  /** The edge role's service, its body path warmed up (it fails closed: a late first reply is a 504). */
  private EdgeGuardService edgeGuard(long begin) {
    EdgeGuardService guard = new EdgeGuardService(config, metrics, new EdgeGuardMetrics(metrics.registry()));
    int rounds = guard.warmUp(EDGE_WARMUP);
    log.debug("edge guard body path warmed up after {} ms: {} rounds", millisSince(begin), rounds);
    return guard;
  }

  /** What the real server and the warm-up's twin of it serve, and their message size limit. */
  private NettyServerBuilder withServices(NettyServerBuilder builder, BindableService extProc, BindableService health) {
    return builder
        .maxInboundMessageSize(config.grpc().maxInboundMessageBytes())
        .addService(extProc)
        .addService(health)
        .addService(ProtoReflectionServiceV1.newInstance());
  }

  /**
   * Logs the warm-up: an error when a synthetic generation response was not corrected (the start-up
   * self-check), a warning when it could not finish; the numbers at debug level.
   */
  private static void logWarmup(Warmup.Result warmup, long begin) {
    if (warmup.problem() != null) {
      log.warn("start-up warm-up stopped early: {}; the first exchanges may be slow", warmup.problem());
    }
    if (!warmup.uncorrected().isEmpty()) {
      log.error(
          "start-up self-check failed: synthetic generation responses were not corrected: {}",
          String.join(", ", warmup.uncorrected()));
    }
    log.debug(
        "warm-up done after {} ms: {} ms, {} rounds, {} exchanges, slowest reply of the last round {} us",
        millisSince(begin),
        warmup.nanos() / 1_000_000,
        warmup.rounds(),
        warmup.exchanges(),
        warmup.slowestReplyNanos() / 1_000);
  }

  /**
   * The store named by {@code store.type}. This is the one place a new store implementation is wired in.
   */
  private static ContextUsageStore openStore(Config.Store store, ScheduledExecutorService timer)
      throws StartupException {
    return switch (store.type()) {
      case MEMORY -> new MemoryContextUsageStore(store.ttl(), store.maxEntries(), timer);
      case REDIS -> openRedisStore(store, timer);
    };
  }

  /**
   * The Redis store. An invalid {@code store.redis_uri} stops the start; an unreachable Redis does not:
   * the store connects in the background and traffic passes through until it has.
   */
  private static ContextUsageStore openRedisStore(Config.Store store, ScheduledExecutorService timer)
      throws StartupException {
    try {
      return RedisContextUsageStore.open(
          new RedisContextUsageStore.Settings(
              store.redisUri(), store.redisCluster(), store.keyPrefix(), store.ttl(), store.redisTimeout()),
          timer);
    } catch (IllegalArgumentException e) {
      throw new StartupException("store.redis_uri: " + e.getMessage(), e);
    }
  }

  /** A single-thread scheduler on a daemon thread named {@value #TIMER_THREAD_NAME}. */
  static ScheduledExecutorService newTimer() {
    ScheduledThreadPoolExecutor timer = new ScheduledThreadPoolExecutor(1, DaemonThreads.named(TIMER_THREAD_NAME));
    // Deadlines are mostly cancelled (the context usage arrives first): drop them at once.
    timer.setRemoveOnCancelPolicy(true);
    return timer;
  }

  /** The configuration this runtime runs with. */
  public Config config() {
    return config;
  }

  /** The metrics exposed on {@code /metrics}. */
  public Metrics metrics() {
    return metrics;
  }

  /** The context usage store handed to the ext_proc service. */
  public ContextUsageStore store() {
    return store;
  }

  /** The timer handed to the store and the ext_proc service. */
  public ScheduledExecutorService timer() {
    return timer;
  }

  /**
   * The TCP port the gRPC server listens on (the chosen one when {@code grpc.port} is 0); -1 when it
   * listens on a Unix socket.
   */
  public int grpcPort() {
    return grpcServer.getPort();
  }

  /** The address the gRPC server listens on: an {@link java.net.InetSocketAddress} or a Unix socket. */
  public SocketAddress grpcAddress() {
    return grpcServer.getListenSockets().get(0);
  }

  /** The leaf certificate new TLS handshakes present; empty without TLS. */
  public Optional<X509Certificate> tlsCertificate() {
    return listener == null || listener.tls() == null
        ? Optional.empty()
        : Optional.of(listener.tls().certificate());
  }

  /**
   * Completes when the certificate reload pass that starts next has finished (see {@code
   * grpc.tls.reload_interval}); for tests, which wait on it instead of the interval.
   */
  CompletableFuture<Void> nextTlsReload() {
    if (listener == null || listener.tls() == null) {
      throw new IllegalStateException("no TLS listener");
    }
    return listener.tls().nextReload();
  }

  /** The port the admin server listens on (the chosen one when {@code admin.port} is 0). */
  public int adminPort() {
    return adminServer.port();
  }

  /** Time {@link #start} took, from creating the timer to the admin server listening. */
  public Duration startupTime() {
    return startupTime;
  }

  /** What {@code /readyz} answers: true while the gRPC server serves and the store is ready. */
  public boolean isReady() {
    return notReadyReason().isEmpty();
  }

  private Optional<String> notReadyReason() {
    if (!serving) {
      return Optional.of(closing.get() ? "shutting down" : "grpc server not serving");
    }
    if (store == null || !store.isReady()) {
      return Optional.of("context usage store not ready");
    }
    return Optional.empty();
  }

  /** Blocks until {@link #close()} has finished (called by this or any other thread). */
  public void awaitTermination() throws InterruptedException {
    terminated.await();
  }

  /** Like {@link #awaitTermination()} with a limit; true when terminated. */
  public boolean awaitTermination(Duration timeout) throws InterruptedException {
    return terminated.await(timeout.toNanos(), TimeUnit.NANOSECONDS);
  }

  /** True once {@link #close()} has finished. */
  public boolean isTerminated() {
    return terminated.getCount() == 0;
  }

  /**
   * Drains and stops everything, in order: health NOT_SERVING and {@code /readyz} 503 at once, no new
   * connections or streams, in-flight streams given up to {@code shutdown.drain_timeout} to finish and
   * then cancelled. Returns as soon as the last stream ended. A second caller waits for the first one to
   * finish.
   */
  @Override
  public void close() {
    if (!closing.compareAndSet(false, true)) {
      awaitTerminationUninterruptibly();
      return;
    }
    long begin = System.nanoTime();
    log.info(
        "stopping: health NOT_SERVING, draining {} ext_proc stream(s) for up to {}",
        metrics.activeStreams(),
        ConfigLoader.formatDuration(config.shutdown().drainTimeout()));
    try {
      stopAll();
    } finally {
      terminated.countDown();
    }
    log.info("stopped in {} ms", millisSince(begin));
  }

  private void closeQuietly() {
    closing.set(true);
    try {
      stopAll();
    } finally {
      terminated.countDown();
    }
  }

  private void stopAll() {
    serving = false;
    if (health != null) {
      health.enterTerminalState();
    }
    if (grpcServer != null) {
      Duration drain = config.shutdown().drainTimeout();
      grpcServer.shutdown();
      try {
        if (!grpcServer.awaitTermination(drain.toNanos(), TimeUnit.NANOSECONDS)) {
          log.warn(
              "{} ext_proc stream(s) still open after the drain timeout of {}; cancelling them",
              metrics.activeStreams(),
              ConfigLoader.formatDuration(drain));
          grpcServer.shutdownNow();
          grpcServer.awaitTermination(CANCEL_GRACE.toNanos(), TimeUnit.NANOSECONDS);
        }
      } catch (InterruptedException e) {
        grpcServer.shutdownNow();
        Thread.currentThread().interrupt();
      }
    }
    if (listener != null) {
      listener.close();
    }
    if (adminServer != null) {
      adminServer.close();
    }
    if (otlp != null) {
      otlp.close(); // the last exchanges' numbers go out before the process ends
    }
    if (store != null) {
      try {
        store.close();
      } catch (RuntimeException e) {
        log.warn("closing the context usage store failed: {}", e.toString());
      }
    }
    if (timer != null) {
      timer.shutdownNow();
    }
  }

  private void awaitTerminationUninterruptibly() {
    boolean interrupted = false;
    while (true) {
      try {
        terminated.await();
        break;
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  /** Runs {@code work} on a new daemon thread (the JVM collectors' one-off registration). */
  private static void daemonThread(Runnable work) {
    Thread thread = new Thread(work, "disagg-usage-jvm-metrics");
    thread.setDaemon(true);
    thread.start();
  }

  private static long millisSince(long nanoTime) {
    return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - nanoTime);
  }
}
