package io.disaggusage.extproc.warmup;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.warmup.WarmupFlows.Flow;
import io.grpc.ManagedChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The warm-up's rounds: each round sends every flow of {@link WarmupFlows} once, split between
 * {@value #DRIVERS} drivers that run at the same time on connections of their own, so that a small
 * machine's cores all load classes and answer streams (docs/performance.md has what that saves).
 */
final class WarmupRounds {
  private static final Logger log = LoggerFactory.getLogger(WarmupRounds.class);
  static final int DRIVERS = 2;

  private final Config config;
  int count;
  int exchanges;
  /** The slowest reply of the last round. */
  long slowestReplyNanos;
  final Set<String> uncorrected = new TreeSet<>();

  WarmupRounds(Config config) {
    this.config = config;
  }

  /**
   * Runs at least {@link Warmup#MIN_ROUNDS} rounds, then more until one is {@linkplain Warmup#FAST
   * fast}, starting none after {@code deadline} ({@link System#nanoTime()}).
   */
  void runUntilFast(List<ManagedChannel> channels, long deadline)
      throws EnvoyShapedExchange.Stalled, InterruptedException {
    List<Driver> drivers = new ArrayList<>();
    for (int d = 0; d < DRIVERS; d++) {
      drivers.add(new Driver(channels.subList(d * channels.size() / DRIVERS, (d + 1) * channels.size() / DRIVERS)));
    }
    ExecutorService helpers =
        Executors.newFixedThreadPool(
            DRIVERS - 1,
            runnable -> {
              Thread thread = new Thread(runnable, "disagg-usage-warmup");
              thread.setDaemon(true);
              return thread;
            });
    try {
      do {
        long begin = System.nanoTime();
        runRound(drivers, helpers);
        log.debug(
            "warm-up round {}: {} us, slowest reply {} us",
            count,
            (System.nanoTime() - begin) / 1_000,
            slowestReplyNanos / 1_000);
      } while (count < Warmup.MIN_ROUNDS
          || (slowestReplyNanos > Warmup.FAST.toNanos() && System.nanoTime() < deadline));
    } finally {
      helpers.shutdownNow();
    }
  }

  /** The first driver runs its share on this thread, the others on the helpers. */
  private void runRound(List<Driver> drivers, ExecutorService helpers)
      throws EnvoyShapedExchange.Stalled, InterruptedException {
    List<Flow> flows = WarmupFlows.forConfig(config, count);
    List<Future<Void>> others = new ArrayList<>();
    for (int d = 1; d < drivers.size(); d++) {
      Driver driver = drivers.get(d);
      List<Flow> share = share(flows, d);
      others.add(
          helpers.submit(
              () -> {
                driver.run(share);
                return null;
              }));
    }
    drivers.get(0).run(share(flows, 0));
    for (Future<Void> other : others) {
      try {
        other.get();
      } catch (ExecutionException e) {
        if (e.getCause() instanceof EnvoyShapedExchange.Stalled stalled) {
          throw stalled;
        }
        throw new IllegalStateException("warm-up driver failed", e.getCause());
      }
    }
    count++;
    exchanges = 0;
    slowestReplyNanos = 0;
    for (Driver driver : drivers) {
      exchanges += driver.exchanges;
      slowestReplyNanos = Math.max(slowestReplyNanos, driver.slowestReplyNanos);
      uncorrected.addAll(driver.uncorrected);
      driver.slowestReplyNanos = 0;
    }
  }

  /** Every {@value #DRIVERS}th flow, from the {@code driver}th. */
  private static List<Flow> share(List<Flow> flows, int driver) {
    List<Flow> share = new ArrayList<>();
    for (int i = driver; i < flows.size(); i += DRIVERS) {
      share.add(flows.get(i));
    }
    return share;
  }

  /** Runs flows on its own connections, one exchange at a time. */
  private static final class Driver {
    private final List<ManagedChannel> channels;
    int exchanges;
    long slowestReplyNanos;
    final Set<String> uncorrected = new TreeSet<>();

    Driver(List<ManagedChannel> channels) {
      this.channels = channels;
    }

    void run(List<Flow> flows) throws EnvoyShapedExchange.Stalled, InterruptedException {
      for (Flow flow : flows) {
        run(flow.context());
        if (!flow.isCorrected(run(flow.generation()))) {
          uncorrected.add(flow.name());
        }
      }
    }

    /**
     * Runs {@code leg} on the next connection: exchanges spread over the connections as Envoy's worker
     * threads spread them over theirs. Streams alternate between the two ways Envoy ends them.
     */
    private String run(WarmupFlows.Leg leg) throws EnvoyShapedExchange.Stalled, InterruptedException {
      ManagedChannel channel = channels.get(exchanges % channels.size());
      EnvoyShapedExchange.Result r = EnvoyShapedExchange.run(channel, leg, Warmup.REPLY_TIMEOUT, exchanges % 2 == 0);
      exchanges++;
      slowestReplyNanos = Math.max(slowestReplyNanos, r.slowestReplyNanos());
      return r.clientBody();
    }
  }
}
