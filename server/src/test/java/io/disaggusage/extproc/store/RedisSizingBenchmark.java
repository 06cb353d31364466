package io.disaggusage.extproc.store;

import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.classify.CorrelationKey.Source;
import io.disaggusage.extproc.classify.PromptFingerprint;
import io.disaggusage.extproc.usage.ContextUsage;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import java.math.BigInteger;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Not a test: Redis memory per stored context usage in the store's current format (docs/redis.md,
 * "Sizing"). Puts {@code entries} context usages, each under its own fingerprint, with two keys (a
 * TensorRT-LLM context response: disagg_request_id and ctx_request_id) and then with one key (an
 * {@code x-request-id}), on a redis-server this benchmark starts on loopback, and prints {@code
 * used_memory} per entry (keys, values, expiry, the per-key fingerprint sets and the index included).
 *
 * <p>Run: {@code mvn -B -q -pl server test-compile exec:java
 * -Dexec.mainClass=io.disaggusage.extproc.store.RedisSizingBenchmark -Dexec.classpathScope=test}
 * with an optional argument {@code [entries]} (default 100000).
 */
public final class RedisSizingBenchmark {
  private static final ContextUsage USAGE =
      new ContextUsage(BigInteger.valueOf(4096), Map.of("cached_tokens", "1024"), BigInteger.valueOf(1024));
  private static final Pattern USED = Pattern.compile("(?m)^used_memory:(\\d+)");

  private RedisSizingBenchmark() {}

  public static void main(String[] args) throws Exception {
    int entries = BenchmarkArgs.intArg(args, 0, 100_000);
    BenchmarkArgs.requireRedisServer();
    ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
    try (RedisServer redis = RedisServer.start()) {
      RedisClient client = RedisClient.create(redis.uri());
      try (StatefulRedisConnection<String, String> info = client.connect()) {
        System.out.printf(Locale.ROOT, "Redis memory per context usage, %d entries each (%s)%n", entries,
            info.sync().info("server").lines().filter(l -> l.startsWith("redis_version")).findFirst().orElse("?"));
        for (int keysPerEntry : new int[] {2, 1}) {
          try (RedisContextUsageStore store =
              RedisStores.openReady(
                  new RedisContextUsageStore.Settings(
                      redis.uri(), false, "size" + keysPerEntry + ":", Duration.ofHours(1), Duration.ofSeconds(5)),
                  timer)) {
            info.sync().flushall();
            long before = used(info);
            fill(store, entries, keysPerEntry);
            long after = used(info);
            System.out.printf(Locale.ROOT, "%d key%s per entry: %.0f bytes per entry (%d Redis keys)%n", keysPerEntry,
                keysPerEntry == 1 ? "" : "s", (after - before) / (double) entries, info.sync().dbsize());
          }
        }
      } finally {
        client.shutdown();
      }
    } finally {
      timer.shutdownNow();
    }
  }

  private static void fill(ContextUsageStore store, int entries, int keysPerEntry) throws Exception {
    List<CompletableFuture<Void>> window = new ArrayList<>();
    for (int i = 0; i < entries; i++) {
      List<CorrelationKey> keys = keysPerEntry == 2
          ? List.of(new CorrelationKey(Source.TRTLLM, Long.toString(7_000_000_000_000_000_000L + i)),
              new CorrelationKey(Source.TRTLLM, Long.toString(8_000_000_000_000_000_000L + i)))
          : List.of(new CorrelationKey(Source.REQUEST_ID, java.util.UUID.nameUUIDFromBytes(Integer.toString(i).getBytes()).toString()));
      window.add(store.put(keys, new PromptFingerprint(i * 0x9E3779B97F4A7C15L, ~i * 0xC2B2AE3D27D4EB4FL), USAGE));
      if (window.size() == 256) {
        CompletableFuture.allOf(window.toArray(CompletableFuture[]::new)).get(30, TimeUnit.SECONDS);
        window.clear();
      }
    }
    CompletableFuture.allOf(window.toArray(CompletableFuture[]::new)).get(30, TimeUnit.SECONDS);
  }

  private static long used(StatefulRedisConnection<String, String> info) {
    Matcher m = USED.matcher(info.sync().info("memory"));
    if (!m.find()) {
      throw new IllegalStateException("INFO memory without used_memory");
    }
    return Long.parseLong(m.group(1));
  }
}
