package io.disaggusage.extproc.store;

import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.classify.PromptFingerprint;
import io.disaggusage.extproc.classify.CorrelationKey.Source;
import io.disaggusage.extproc.usage.ContextUsage;
import java.math.BigInteger;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Not a test: measures what the store adds to an exchange. A context write is the {@code put} the last
 * context reply waits for; a generation lookup is the {@code take} at the generation's response headers.
 * Each is timed one at a time (call to completed future), against the memory store and against the
 * Redis store on a redis-server this benchmark starts on loopback, and printed as p50/p99 and ratios.
 *
 * <p>Run (docs/redis.md, "Benchmark"): {@code mvn -B -q -pl server test-compile exec:java
 * -Dexec.mainClass=io.disaggusage.extproc.store.StoreRoundTripBenchmark -Dexec.classpathScope=test}
 * with optional arguments {@code [round trips] [warm-up round trips]}.
 */
public final class StoreRoundTripBenchmark {
  private static final ContextUsage USAGE =
      new ContextUsage(BigInteger.valueOf(4096), Map.of("cached_tokens", "1024"), BigInteger.valueOf(1024));

  private StoreRoundTripBenchmark() {}

  /** Latencies of one store, in nanoseconds. */
  private record Result(String store, long[] puts, long[] takes) {
    long put(double quantile) {
      return at(puts, quantile);
    }

    long take(double quantile) {
      return at(takes, quantile);
    }

    private static long at(long[] sorted, double quantile) {
      return sorted[Math.min(sorted.length - 1, (int) Math.ceil(quantile * sorted.length) - 1)];
    }
  }

  /** Both legs of every timed flow carry one: the lookups compare it, as in production. */
  private static final PromptFingerprint FINGERPRINT = new PromptFingerprint(0x1234_5678_9abc_def0L, 0x0fed_cba9_8765_4321L);

  public static void main(String[] args) throws Exception {
    int rounds = BenchmarkArgs.intArg(args, 0, 20_000);
    int warmUp = BenchmarkArgs.intArg(args, 1, 5_000);
    BenchmarkArgs.requireRedisServer();
    ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
    try (RedisServer redis = RedisServer.start()) {
      Result memory;
      try (ContextUsageStore store = new MemoryContextUsageStore(Duration.ofSeconds(60), 100_000, timer)) {
        run(store, "warm", warmUp);
        memory = run(store, "memory", rounds);
      }
      Result remote;
      try (RedisContextUsageStore store =
          RedisStores.openReady(
              new RedisContextUsageStore.Settings(
                  redis.uri(), false, "bench:", Duration.ofSeconds(60), Duration.ofMillis(50)),
              timer)) {
        run(store, "warm", warmUp);
        remote = run(store, "redis", rounds);
      }
      System.out.printf(
          Locale.ROOT,
          "store round trips, %d each after %d warm-up (%s, %d cores, redis-server on loopback)%n",
          rounds,
          warmUp,
          System.getProperty("java.vm.name") + " " + System.getProperty("java.version"),
          Runtime.getRuntime().availableProcessors());
      System.out.printf(Locale.ROOT, "%-28s %12s %12s %12s %12s%n", "", "memory p50", "memory p99", "redis p50", "redis p99");
      print("context write (put)", memory.put(0.5), memory.put(0.99), remote.put(0.5), remote.put(0.99));
      print("generation lookup (take)", memory.take(0.5), memory.take(0.99), remote.take(0.5), remote.take(0.99));
      System.out.printf(
          Locale.ROOT,
          "ratio redis/memory: put p50 %.0fx, p99 %.0fx; take p50 %.0fx, p99 %.0fx%n",
          ratio(remote.put(0.5), memory.put(0.5)),
          ratio(remote.put(0.99), memory.put(0.99)),
          ratio(remote.take(0.5), memory.take(0.5)),
          ratio(remote.take(0.99), memory.take(0.99)));
      System.out.printf(
          Locale.ROOT,
          "added per request (put + take, p50): %.1f µs%n",
          (remote.put(0.5) + remote.take(0.5) - memory.put(0.5) - memory.take(0.5)) / 1000.0);
    } finally {
      timer.shutdownNow();
    }
  }

  private static Result run(ContextUsageStore store, String name, int rounds) throws Exception {
    long[] puts = new long[rounds];
    long[] takes = new long[rounds];
    for (int i = 0; i < rounds; i++) {
      // Two aliases, as a TensorRT-LLM context response has (disagg_request_id and ctx_request_id).
      List<CorrelationKey> keys =
          List.of(new CorrelationKey(Source.TRTLLM, name + "-d" + i), new CorrelationKey(Source.TRTLLM, name + "-c" + i));
      long start = System.nanoTime();
      store.put(keys, FINGERPRINT, USAGE).get(5, TimeUnit.SECONDS);
      long stored = System.nanoTime();
      if (store.take(List.of(keys.get(1)), FINGERPRINT).get(5, TimeUnit.SECONDS).usage().isEmpty()) {
        throw new IllegalStateException(name + ": entry " + i + " not found");
      }
      takes[i] = System.nanoTime() - stored;
      puts[i] = stored - start;
    }
    Arrays.sort(puts);
    Arrays.sort(takes);
    return new Result(name, puts, takes);
  }

  private static void print(String what, long memP50, long memP99, long redisP50, long redisP99) {
    System.out.printf(
        Locale.ROOT,
        "%-28s %10.1fµs %10.1fµs %10.1fµs %10.1fµs%n",
        what,
        memP50 / 1000.0,
        memP99 / 1000.0,
        redisP50 / 1000.0,
        redisP99 / 1000.0);
  }

  private static double ratio(long a, long b) {
    return (double) a / Math.max(1, b);
  }
}
