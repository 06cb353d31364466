package io.disaggusage.extproc.warmup;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.stream.ExtProcService;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.store.MemoryContextUsageStore;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.protobuf.services.HealthStatusManager;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Start-up warm-up over the real gRPC path. A fresh JVM answers its first ext_proc exchanges slowly:
 * what the first real stream touches first — Netty's HTTP/2 codec, buffer pools and event-loop threads,
 * grpc-java's stream set-up and executor threads, protobuf parsing of Envoy's messages, the service's
 * parsers — is loaded, initialised and interpreted then, and that has taken longer than Envoy's 200 ms
 * {@code message_timeout}, so Envoy let the first exchanges through uncorrected. The warm-up sends
 * Envoy-shaped exchanges ({@link EnvoyShapedExchange}, {@link WarmupFlows}) over several real
 * connections through the {@link WarmupStack} — the real server's stack on a private address — in
 * rounds ({@link WarmupRounds}) until one is fast, before the real listener opens.
 *
 * <p>It serves a private {@link ExtProcService} with its own memory store and standalone metrics, so it
 * leaves nothing in the operator's store (never Redis) or metrics. Every generation response must come
 * out corrected: the warm-up doubles as a start-up self-check.
 *
 * <p>{@link #close()} stops the private server and channels. Close it after the real server has
 * started: the real server then takes over the event-loop and executor threads the warm-up started
 * (grpc-java shares them between servers and channels while any holds them), instead of new ones.
 */
public final class Warmup implements AutoCloseable {
  /**
   * Connections the exchanges spread over: several HTTP/2 connection set-ups, served by several of
   * the event loops, as Envoy's worker threads each open their own connection.
   */
  static final int CONNECTIONS = 4;
  /**
   * Rounds that always run. The first loads and initialises everything the real path touches: nearly
   * all of the cold cost (docs/performance.md, "Start-up and the first exchange").
   */
  static final int MIN_ROUNDS = 1;
  /**
   * Then rounds run until one is fast: none of its replies took longer than this, a tenth of Envoy's
   * default 200 ms message timeout. After the first round the slowest reply is 10-25 ms on 2 idle
   * cores; a stricter bar bought rounds of 0.1 s each that the first real exchanges did not need (the
   * JIT compiles the hot paths under real traffic within seconds either way).
   */
  static final Duration FAST = Duration.ofMillis(20);
  /**
   * No round starts after this much time, to keep start-up under a second. A loaded machine may never
   * see a fast round; after the first round the first real exchanges are fast enough already.
   */
  static final Duration TIME_LIMIT = Duration.ofMillis(500);
  /**
   * A reply slower than this ends the warm-up as failed. Generous: on a loaded machine a cold JVM's
   * first replies take seconds, and a stopped warm-up leaves the first real exchanges slow.
   */
  static final Duration REPLY_TIMEOUT = Duration.ofSeconds(10);

  /**
   * What the warm-up did.
   *
   * @param nanos time from start to the end of the last round
   * @param rounds rounds run, each one exchange pair per flow
   * @param exchanges ext_proc streams run
   * @param slowestReplyNanos the slowest reply of the last round
   * @param uncorrected the flows whose generation response did not come out corrected (the start-up
   *     self-check: empty when the correction works)
   * @param problem why the warm-up stopped early, or null
   */
  public record Result(
      long nanos, int rounds, int exchanges, long slowestReplyNanos, Set<String> uncorrected, String problem) {
    /** The self-check passed: every round ran and every generation response came out corrected. */
    public boolean corrected() {
      return uncorrected.isEmpty() && problem == null;
    }
  }

  private final WarmupStack stack;
  private final MemoryContextUsageStore store;
  private final List<ManagedChannel> channels = new ArrayList<>();
  private Server server;
  private Result result;

  private Warmup(WarmupStack stack, MemoryContextUsageStore store) {
    this.stack = stack;
    this.store = store;
  }

  /**
   * Starts the private server on {@code stack}, runs the exchanges and returns with the private server
   * still up; see {@link #result()} and {@link #close()}.
   */
  public static Warmup run(Config config, ScheduledExecutorService timer, WarmupStack stack) {
    long begin = System.nanoTime();
    Warmup warmup = new Warmup(stack, new MemoryContextUsageStore(config.store().ttl(), 1024, timer));
    WarmupRounds rounds = new WarmupRounds(config);
    String problem = null;
    try {
      warmup.start(new ExtProcService(config, warmup.store, Metrics.standalone(), timer));
      rounds.runUntilFast(warmup.channels, begin + TIME_LIMIT.toNanos());
    } catch (IOException | RuntimeException | EnvoyShapedExchange.Stalled e) {
      problem = e.toString();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      problem = "interrupted";
    }
    warmup.result =
        new Result(
            System.nanoTime() - begin,
            rounds.count,
            rounds.exchanges,
            rounds.slowestReplyNanos,
            Set.copyOf(rounds.uncorrected),
            problem);
    return warmup;
  }

  /** What {@link #run} did. */
  public Result result() {
    return result;
  }

  private void start(ExtProcService service) throws IOException {
    HealthStatusManager health = new HealthStatusManager();
    health.setStatus(HealthStatusManager.SERVICE_NAME_ALL_SERVICES, ServingStatus.SERVING);
    health.setStatus(ExternalProcessorGrpc.SERVICE_NAME, ServingStatus.SERVING);
    server = stack.start(service, health.getHealthService());
    for (int i = 0; i < CONNECTIONS; i++) {
      ManagedChannel channel = stack.connect(server);
      channels.add(channel);
      // What Envoy's active health check sends; it also opens the connection.
      HealthGrpc.newBlockingStub(channel)
          .withDeadlineAfter(REPLY_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS)
          .check(HealthCheckRequest.newBuilder().setService(ExternalProcessorGrpc.SERVICE_NAME).build());
    }
  }

  /** Stops the private server and channels (after the real server has started: see the class comment). */
  @Override
  public void close() {
    for (ManagedChannel channel : channels) {
      channel.shutdownNow();
    }
    if (server != null) {
      server.shutdownNow();
    }
    try {
      for (ManagedChannel channel : channels) {
        channel.awaitTermination(2, TimeUnit.SECONDS);
      }
      if (server != null) {
        server.awaitTermination(2, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    store.close();
    stack.close();
  }
}
