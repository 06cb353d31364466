package io.disaggusage.extproc.store;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.classify.PromptFingerprint;
import io.disaggusage.extproc.classify.CorrelationKey.Source;
import io.disaggusage.extproc.usage.ContextUsage;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisCommandTimeoutException;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import java.math.BigInteger;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** What only the Redis store has: its wire format, and its behaviour when Redis is slow, down or late. */
class RedisContextUsageStoreTest {
  private static final CorrelationKey A = new CorrelationKey(Source.TRTLLM, "2748779069441234567");
  private static final CorrelationKey B = new CorrelationKey(Source.TRTLLM, "2748779069441234999");
  private static final PromptFingerprint FP = new PromptFingerprint(0x0123456789abcdefL, 0x0123456789abcdefL);
  private static final String FP_HEX = "0123456789abcdef0123456789abcdef";
  private static final ContextUsage USAGE =
      new ContextUsage(BigInteger.valueOf(101), Map.of("cached_tokens", "7"), BigInteger.valueOf(7));
  private static final Duration TIMEOUT = Duration.ofMillis(100);
  /** What one failed operation may take beyond the command timeout (scheduling, a loaded CI host). */
  private static final Duration SLACK = Duration.ofMillis(400);

  private final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
  private final List<AutoCloseable> closeables = new ArrayList<>();
  private RedisServer redis;

  @BeforeEach
  void start() throws Exception {
    redis = RedisServer.start();
  }

  @AfterEach
  void stop() throws Exception {
    for (AutoCloseable c : closeables) {
      c.close();
    }
    if (redis != null) {
      redis.close();
    }
    timer.shutdownNow();
  }

  private RedisContextUsageStore.Settings settings(String uri, String prefix, Duration ttl) {
    return new RedisContextUsageStore.Settings(uri, false, prefix, ttl, TIMEOUT);
  }

  /** A store on the test Redis under {@code prefix} with a 30 s TTL, once it is ready. */
  private RedisContextUsageStore openReady(String prefix) throws Exception {
    RedisContextUsageStore store = open(settings(redis.uri(), prefix, Duration.ofSeconds(30)));
    RedisStores.awaitReady(store, Duration.ofSeconds(10));
    return store;
  }

  private RedisContextUsageStore open(RedisContextUsageStore.Settings settings) {
    return open(settings, timer);
  }

  private RedisContextUsageStore open(RedisContextUsageStore.Settings settings, ScheduledExecutorService on) {
    RedisContextUsageStore store = RedisContextUsageStore.open(settings, on);
    closeables.add(store);
    return store;
  }

  /**
   * A timer that runs one-shot tasks as any other but hands its periodic ones (the health check) to the
   * test: the test runs them, so it knows when one ran instead of waiting for it.
   */
  private static final class ManualPeriodicTimer extends ScheduledThreadPoolExecutor {
    final List<Runnable> periodic = new CopyOnWriteArrayList<>();
    final List<Duration> periods = new CopyOnWriteArrayList<>();

    ManualPeriodicTimer() {
      super(1);
    }

    @Override
    public ScheduledFuture<?> scheduleWithFixedDelay(Runnable task, long initialDelay, long delay, TimeUnit unit) {
      periodic.add(task);
      periods.add(Duration.of(delay, unit.toChronoUnit()));
      return schedule(() -> {}, 365, TimeUnit.DAYS); // what the store cancels on close; never due
    }
  }

  private StatefulRedisConnection<String, String> plainConnection() {
    RedisClient client = RedisClient.create(redis.uri());
    closeables.add(client::shutdown);
    return client.connect();
  }

  @Test
  void keysAndValueFollowTheDocumentedV2FormatAndEveryKeyHasATtl() throws Exception {
    RedisContextUsageStore store = openReady("fmt:");
    RedisClient subscriber = RedisClient.create(redis.uri());
    closeables.add(subscriber::shutdown);
    StatefulRedisPubSubConnection<String, String> pubsub = subscriber.connectPubSub();
    LinkedBlockingQueue<String> wakeUps = new LinkedBlockingQueue<>();
    pubsub.addListener(
        new RedisPubSubAdapter<>() {
          @Override
          public void message(String channel, String message) {
            wakeUps.add(channel + " " + message);
          }
        });
    pubsub.sync().subscribe("fmt:v2:ready");

    Map<String, String> details = new LinkedHashMap<>();
    details.put("cached_tokens", "7");
    details.put("audio_tokens", "0");
    store.put(List.of(A, B), FP, new ContextUsage(new BigInteger("9007199254740993"), details, BigInteger.valueOf(7)))
        .join();

    var redisSync = plainConnection().sync();
    assertThat(redisSync.keys("*"))
        .containsExactlyInAnyOrder(
            "{fmt:v2}:ctx:" + FP_HEX + ":trt:2748779069441234567",
            "{fmt:v2}:ctx:" + FP_HEX + ":trt:2748779069441234999",
            "{fmt:v2}:fps:trt:2748779069441234567",
            "{fmt:v2}:fps:trt:2748779069441234999",
            "{fmt:v2}:entries");
    String value = redisSync.get("{fmt:v2}:ctx:" + FP_HEX + ":trt:2748779069441234567");
    assertThat(redisSync.get("{fmt:v2}:ctx:" + FP_HEX + ":trt:2748779069441234999")).isEqualTo(value);
    assertThat(redisSync.zrange("{fmt:v2}:fps:trt:2748779069441234567", 0, -1)).containsExactly(FP_HEX);
    assertThat(value)
        .matches(
            "\\{\"v\":2,\"id\":\"[0-9a-f-]{36}\",\"fp\":\"" + FP_HEX + "\",\"keys\":\\[\"trt:2748779069441234567\",\"trt:2748779069441234999\"],"
                + "\"prompt_tokens\":\"9007199254740993\",\"cached_tokens\":\"7\","
                + "\"details\":\\{\"cached_tokens\":\"7\",\"audio_tokens\":\"0\"}}");
    String id = new ObjectMapper().readTree(value).get("id").textValue();
    for (String key : redisSync.keys("*")) {
      assertThat(redisSync.pttl(key)).as(key).isBetween(1L, 30_000L);
    }
    assertThat(redisSync.zrange("{fmt:v2}:entries", 0, -1)).containsExactly(id);
    assertThat(wakeUps.poll(5, TimeUnit.SECONDS))
        .isEqualTo(
            "fmt:v2:ready {\"fp\":\"" + FP_HEX + "\",\"keys\":[\"trt:2748779069441234567\",\"trt:2748779069441234999\"]}");

    assertThat(store.take(List.of(B), null).join()).isEqualTo(ContextLookup.MISMATCH);
    assertThat(store.take(List.of(B), FP).join().usage()).isPresent();
    assertThat(redisSync.keys("*")).isEmpty(); // the index went with its last member
  }

  @Test
  void aValueWrittenByHandIsReadAsDocumented() throws Exception {
    RedisContextUsageStore store = openReady("doc:");
    var redisSync = plainConnection().sync();
    String value =
        "{\"v\":2,\"id\":\"e1\",\"fp\":\"-\",\"keys\":[\"xrid:abc\",\"hdr:abc\"],\"prompt_tokens\":\"18446744073709551616\","
            + "\"cached_tokens\":\"5\",\"details\":{\"cached_tokens\":\"5\",\"x\":\"[1,{\\\"y\\\":2.50}]\"}}";
    redisSync.psetex("{doc:v2}:ctx:-:xrid:abc", 30_000, value);
    redisSync.psetex("{doc:v2}:ctx:-:hdr:abc", 30_000, value);
    Optional<ContextUsage> taken = store.take(List.of(new CorrelationKey(Source.HEADER, "abc")), null).join().usage();
    Map<String, String> details = new LinkedHashMap<>();
    details.put("cached_tokens", "5");
    details.put("x", "[1,{\"y\":2.50}]");
    assertThat(taken).contains(new ContextUsage(new BigInteger("18446744073709551616"), details, BigInteger.valueOf(5)));
    assertThat(redisSync.exists("{doc:v2}:ctx:-:xrid:abc", "{doc:v2}:ctx:-:hdr:abc")).isZero();
  }

  /**
   * A rolling upgrade: a v1 replica's entry (unbound, under v1 names) is never read by this version,
   * not even by an unbound leg, for an unbound entry is what a colliding or forged key could take.
   */
  @Test
  void aV1EntryLeftByAnOlderReplicaIsIgnored() throws Exception {
    RedisContextUsageStore store = openReady("old:");
    var redisSync = plainConnection().sync();
    String v1 =
        "{\"v\":1,\"id\":\"e1\",\"keys\":[\"xrid:abc\"],\"prompt_tokens\":\"9\",\"cached_tokens\":\"0\",\"details\":{}}";
    redisSync.psetex("{old:v1}:ctx:xrid:abc", 30_000, v1);
    CorrelationKey key = new CorrelationKey(Source.REQUEST_ID, "abc");
    assertThat(store.take(List.of(key), null).join()).isEqualTo(ContextLookup.MISS);
    assertThat(store.take(List.of(key), FP).join()).isEqualTo(ContextLookup.MISS);
    assertThat(redisSync.get("{old:v1}:ctx:xrid:abc")).isEqualTo(v1);
  }

  @Test
  void aForeignValueFailsTheLookupAndIsRemoved() throws Exception {
    RedisContextUsageStore store = openReady("bad:");
    var redisSync = plainConnection().sync();
    redisSync.psetex("{bad:v2}:ctx:-:trt:2748779069441234567", 30_000, "{\"v\":3}");
    assertThatThrownBy(() -> store.take(List.of(A), null).join().usage())
        .hasRootCauseInstanceOf(IllegalArgumentException.class)
        .hasRootCauseMessage("stored value is not a v2 entry");
    assertThat(store.take(List.of(A), null).join().usage()).isEmpty();
  }

  @Test
  void anAliasOverwrittenByANewerEntryIsNotConsumedWithTheOldOne() throws Exception {
    RedisContextUsageStore store = openReady("ovr:");
    ContextUsage newer = new ContextUsage(BigInteger.valueOf(55), Map.of(), BigInteger.ZERO);
    store.put(List.of(A, B), null, USAGE).join();
    store.put(List.of(B), null, newer).join(); // a retry reusing one id
    assertThat(store.take(List.of(A), null).join().usage()).contains(USAGE);
    assertThat(store.take(List.of(B), null).join().usage()).contains(newer);
  }

  @Test
  void sizeCountsEntriesOfAllReplicasAndIsRefreshedInTheBackground() throws Exception {
    RedisContextUsageStore.Settings settings = settings(redis.uri(), "size:", Duration.ofSeconds(30));
    ManualPeriodicTimer twosTimer = new ManualPeriodicTimer();
    RedisContextUsageStore one = open(settings);
    RedisContextUsageStore two = open(settings, twosTimer);
    closeables.add(twosTimer::shutdownNow); // after the store that uses it
    RedisStores.awaitReady(one, Duration.ofSeconds(10));
    RedisStores.awaitReady(two, Duration.ofSeconds(10));
    one.put(List.of(A, B), null, USAGE).join();
    two.put(List.of(new CorrelationKey(Source.HEADER, "h")), null, USAGE).join();
    assertThat(one.countEntries().join()).isEqualTo(2);
    assertThat(two.size()).as("as counted at connect").isZero();

    assertThat(twosTimer.periods).containsExactly(RedisConnection.HEALTH_INTERVAL);
    twosTimer.periodic.get(0).run(); // what the timer runs every HEALTH_INTERVAL
    two.countEntries().join(); // answered on the same connection after the check's count: that one has landed
    assertThat(two.size()).isEqualTo(2);
  }

  @Test
  void unreachableAtStartFailsFastThenConnectsWhenRedisAppears() throws Exception {
    int port = RedisServer.unusedPort();
    RedisContextUsageStore store =
        open(settings("redis://127.0.0.1:" + port, "late:", Duration.ofSeconds(30)));
    assertThat(store.isReady()).isFalse();
    assertFailsWithin(() -> store.put(List.of(A), null, USAGE), SLACK);
    assertFailsWithin(() -> store.take(List.of(A), null), SLACK);
    assertFailsWithin(() -> store.await(List.of(A), null, Duration.ofSeconds(5)), SLACK);
    assertThat(store.waiters()).isZero();

    RedisServer late = RedisServer.startOn(port);
    closeables.add(late);
    RedisStores.awaitReady(store, Duration.ofSeconds(10));
    store.put(List.of(A), null, USAGE).join();
    assertThat(store.take(List.of(A), null).join().usage()).contains(USAGE);
  }

  @Test
  void redisDownFailsEveryOperationWithinTheBudgetAndRecoversWithoutRestart() throws Exception {
    RedisContextUsageStore.Settings settings = settings(redis.uri(), "down:", Duration.ofSeconds(30));
    RedisContextUsageStore store = open(settings);
    RedisContextUsageStore other = open(settings);
    RedisStores.awaitReady(store, Duration.ofSeconds(10));
    RedisStores.awaitReady(other, Duration.ofSeconds(10));

    redis.stop();
    RedisStores.awaitState(store, false, Duration.ofSeconds(5));
    for (int i = 0; i < 5; i++) {
      assertFailsWithin(() -> store.put(List.of(A), null, USAGE), TIMEOUT.plus(SLACK));
      assertFailsWithin(() -> store.take(List.of(A), null), TIMEOUT.plus(SLACK));
      assertFailsWithin(() -> store.await(List.of(A), null, Duration.ofSeconds(5)), TIMEOUT.plus(SLACK));
    }
    assertThat(store.waiters()).isZero();

    redis.restart();
    RedisStores.awaitReady(store, Duration.ofSeconds(10));
    RedisStores.awaitReady(other, Duration.ofSeconds(10));
    // The pub/sub subscription came back too: a waiter here is woken by a put on the other replica.
    CompletableFuture<ContextLookup> waiting = store.await(List.of(B), null, Duration.ofSeconds(5));
    other.put(List.of(B), null, USAGE).join();
    assertThat(waiting.get(5, TimeUnit.SECONDS).usage()).contains(USAGE);
  }

  @Test
  void aStalledRedisCostsAnOperationTheTimeoutNotMore() throws Exception {
    RedisContextUsageStore store = openReady("slow:");
    store.put(List.of(A), null, USAGE).join();
    plainConnection().sync().clientPause(1500); // every client's commands wait 1.5 s
    long start = System.nanoTime();
    assertThatThrownBy(() -> store.take(List.of(A), null).join().usage()).hasCauseInstanceOf(RedisCommandTimeoutException.class);
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(TIMEOUT.plus(SLACK));
    plainConnection().sync().ping(); // a new client's first command waits out the pause: Redis serves again
    // The timed-out take may have run once Redis resumed; either way the entry is used at most once.
    Optional<ContextUsage> after = store.take(List.of(A), null).get(5, TimeUnit.SECONDS).usage();
    store.put(List.of(B), null, USAGE).join();
    assertThat(store.take(List.of(B), null).join().usage()).contains(USAGE);
    assertThat(after.isEmpty() || after.get().equals(USAGE)).isTrue();
  }

  @Test
  void theDocumentedConfigurationAndValueAreWhatTheServiceReads() throws Exception {
    String doc =
        java.nio.file.Files.readString(
            java.nio.file.Path.of(System.getProperty("project.root", ".."), "docs", "redis.md"));
    java.util.regex.Matcher yaml = java.util.regex.Pattern.compile("```yaml\n(store:.*?)```", java.util.regex.Pattern.DOTALL).matcher(doc);
    assertThat(yaml.find()).as("a store: yaml block in docs/redis.md").isTrue();
    var store = io.disaggusage.extproc.config.ConfigLoader.fromYaml(yaml.group(1)).store();
    assertThat(store.type()).isEqualTo(io.disaggusage.extproc.config.Config.StoreType.REDIS);
    assertThat(store.keyPrefix()).isEqualTo("disagg_usage:");
    assertThat(store.redisTimeout()).isEqualTo(Duration.ofMillis(50));
    assertThat(store).isEqualTo(
        new io.disaggusage.extproc.config.Config.Store(
            io.disaggusage.extproc.config.Config.StoreType.REDIS,
            Duration.ofSeconds(60),
            "redis://redis.example:6379",
            io.disaggusage.extproc.config.Config.defaults().store().maxEntries(),
            "disagg_usage:",
            Duration.ofMillis(50),
            false));

    java.util.regex.Matcher json = java.util.regex.Pattern.compile("```json\n(.*?)\n```", java.util.regex.Pattern.DOTALL).matcher(doc);
    assertThat(json.find()).as("the value example in docs/redis.md").isTrue();
    RedisEntryFormat.Entry entry = RedisEntryFormat.decode(json.group(1).replace("\n", ""));
    assertThat(entry.keys()).containsExactly("trt:2748779069441234567", "trt:2748779069441234999");
    assertThat(entry.usage())
        .isEqualTo(new ContextUsage(BigInteger.valueOf(4096), Map.of("cached_tokens", "1024"), BigInteger.valueOf(1024)));
    RedisEntryFormat format = new RedisEntryFormat("disagg_usage:");
    assertThat(doc).contains(format.key("0123456789abcdef0123456789abcdef", "trt:2748779069441234567"), format.indexKey().replace("disagg_usage:", "<prefix>"));
  }

  private static void assertFailsWithin(Supplier<CompletableFuture<?>> operation, Duration limit) throws Exception {
    long start = System.nanoTime();
    CompletableFuture<?> future = operation.get();
    try {
      future.get(limit.toMillis() + 5_000, TimeUnit.MILLISECONDS);
      throw new AssertionError("expected the operation to fail");
    } catch (ExecutionException expected) {
      // failed, as it must while Redis is unreachable
    }
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(limit);
  }
}
