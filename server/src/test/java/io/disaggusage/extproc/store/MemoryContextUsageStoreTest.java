package io.disaggusage.extproc.store;

import static org.assertj.core.api.Assertions.assertThat;

import com.github.benmanes.caffeine.cache.Ticker;
import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.classify.CorrelationKey.Source;
import io.disaggusage.extproc.usage.ContextUsage;
import java.math.BigInteger;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class MemoryContextUsageStoreTest {
  private final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
  private final AtomicLong nanos = new AtomicLong();
  private final Ticker ticker = nanos::get;
  private final MemoryContextUsageStore store =
      new MemoryContextUsageStore(Duration.ofSeconds(60), 1000, timer, ticker);

  private static final CorrelationKey A = new CorrelationKey(Source.TRTLLM, "1");
  private static final CorrelationKey B = new CorrelationKey(Source.TRTLLM, "2");
  private static final ContextUsage USAGE =
      new ContextUsage(BigInteger.TEN, Map.of("cached_tokens", "3"), BigInteger.valueOf(3));

  @AfterEach
  void stop() {
    store.close();
    timer.shutdownNow();
  }

  @Test
  void entryUnderAliasesIsConsumedOnce() {
    store.put(List.of(A, B), null, USAGE).join();
    assertThat(store.size()).isEqualTo(1);
    assertThat(store.take(List.of(B), null).join().usage()).contains(USAGE);
    assertThat(store.take(List.of(A), null).join().usage()).isEmpty();
    assertThat(store.size()).isZero();
  }

  @Test
  void sourcesDoNotCollide() {
    store.put(List.of(new CorrelationKey(Source.REQUEST_ID, "1")), null, USAGE).join();
    assertThat(store.take(List.of(A), null).join().usage()).isEmpty();
  }

  @Test
  void entriesExpireAfterTtl() {
    store.put(List.of(A), null, USAGE).join();
    nanos.addAndGet(TimeUnit.SECONDS.toNanos(61));
    store.cleanUp();
    assertThat(store.take(List.of(A), null).join().usage()).isEmpty();
    assertThat(store.size()).isZero();
  }

  @Test
  void waiterIsWokenByPutAndConsumesIt() {
    CompletableFuture<ContextLookup> waiting = store.await(List.of(A), null, Duration.ofSeconds(5));
    assertThat(waiting).isNotDone();
    assertThat(store.waiters()).isEqualTo(1);
    store.put(List.of(B, A), null, USAGE).join();
    assertThat(waiting.join().usage()).contains(USAGE);
    assertThat(store.waiters()).isZero();
    assertThat(store.size()).isZero();
    assertThat(store.take(List.of(B), null).join().usage()).isEmpty();
  }

  /**
   * A put and an await of one key at the same moment, many times over: the waiter always gets the
   * usage. (A put that found the waiter registering, while the waiter's own re-check had already taken
   * the entry, used to complete it empty: a concurrent SGLang flow then read context_timeout in 0.3 s.)
   */
  @Test
  void aPutRacingAnAwaitNeverLeavesTheWaiterEmpty() throws Exception {
    var pool = Executors.newFixedThreadPool(2);
    try {
      for (int i = 0; i < 20_000; i++) {
        CorrelationKey key = new CorrelationKey(Source.TRTLLM, "race-" + i);
        var start = new java.util.concurrent.CountDownLatch(1);
        var waited = pool.submit(() -> {
          start.await();
          return store.await(List.of(key), null, Duration.ofSeconds(30));
        });
        var put = pool.submit(() -> {
          start.await();
          return store.put(List.of(key), null, USAGE);
        });
        start.countDown();
        put.get().join();
        assertThat(waited.get().get(5, TimeUnit.SECONDS).usage()).as("round %d", i).contains(USAGE);
      }
    } finally {
      pool.shutdownNow();
    }
    assertThat(store.waiters()).isZero();
    assertThat(store.size()).isZero();
  }

  @Test
  void awaitReturnsAnEntryAlreadyThere() {
    store.put(List.of(A), null, USAGE).join();
    assertThat(store.await(List.of(A), null, Duration.ofSeconds(5)).join().usage()).contains(USAGE);
  }

  @Test
  void awaitTimesOutEmptyAndLeavesNoWaiter() {
    CompletableFuture<ContextLookup> waiting = store.await(List.of(A), null, Duration.ofMillis(50));
    assertThat(waiting.orTimeout(5, TimeUnit.SECONDS).join().usage()).isEmpty();
    assertThat(store.waiters()).isZero();
    store.put(List.of(A), null, USAGE).join();
    assertThat(store.size()).isEqualTo(1);
  }

  @Test
  void cancelledWaiterIsWithdrawn() {
    CompletableFuture<ContextLookup> waiting = store.await(List.of(A), null, Duration.ofSeconds(5));
    waiting.cancel(false);
    assertThat(store.waiters()).isZero();
    store.put(List.of(A), null, USAGE).join();
    assertThat(store.take(List.of(A), null).join().usage()).contains(USAGE);
  }

  @Test
  void twoWaitersOnOneKeyGetAtMostOneEntry() {
    var first = store.await(List.of(A), null, Duration.ofMillis(200));
    var second = store.await(List.of(A), null, Duration.ofMillis(200));
    store.put(List.of(A), null, USAGE).join();
    assertThat(first.join().usage()).contains(USAGE);
    assertThat(second.orTimeout(5, TimeUnit.SECONDS).join().usage()).isEmpty();
  }

  @Test
  void sizeIsBounded() {
    MemoryContextUsageStore small = new MemoryContextUsageStore(Duration.ofSeconds(60), 10, timer, ticker);
    for (int i = 0; i < 100; i++) {
      small.put(List.of(new CorrelationKey(Source.HEADER, "k" + i)), null, USAGE).join();
    }
    small.cleanUp();
    assertThat(small.size()).isLessThanOrEqualTo(10);
    small.close();
  }
}
