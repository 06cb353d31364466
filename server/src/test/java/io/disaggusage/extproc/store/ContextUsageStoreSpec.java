package io.disaggusage.extproc.store;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.classify.CorrelationKey.Source;
import io.disaggusage.extproc.usage.ContextUsage;
import java.math.BigInteger;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The {@link ContextUsageStore} contract (behaviour.md §4), one specification run against every store:
 * each subclass says how to open a store and how to reach the same data from a second replica. For the
 * memory store the "other replica" is the store itself (it is one process's store); for Redis it is a
 * second store object on the same Redis, i.e. a second service replica.
 */
abstract class ContextUsageStoreSpec {
  protected static final Duration LONG_TTL = Duration.ofSeconds(60);

  protected final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
  private final List<ContextUsageStore> opened = new ArrayList<>();

  static final CorrelationKey A = new CorrelationKey(Source.TRTLLM, "1");
  static final CorrelationKey B = new CorrelationKey(Source.TRTLLM, "2");
  static final ContextUsage USAGE =
      new ContextUsage(BigInteger.TEN, Map.of("cached_tokens", "3"), BigInteger.valueOf(3));

  /** A new, empty store (its own namespace) whose entries live {@code ttl}. */
  protected abstract ContextUsageStore open(Duration ttl) throws Exception;

  /** A second replica sharing {@code store}'s data. */
  protected abstract ContextUsageStore replicaOf(ContextUsageStore store) throws Exception;

  /** Entries held now, counted by the store's own means. */
  protected abstract long sizeNow(ContextUsageStore store);

  protected final <S extends ContextUsageStore> S track(S store) {
    opened.add(store);
    return store;
  }

  @AfterEach
  void closeStores() {
    opened.forEach(ContextUsageStore::close);
    timer.shutdownNow();
  }

  private ContextUsageStore store() throws Exception {
    return open(LONG_TTL);
  }

  @Test
  void entryUnderAliasesIsConsumedOnce() throws Exception {
    ContextUsageStore store = store();
    ContextUsageStore other = replicaOf(store);
    store.put(List.of(A, B), USAGE).join();
    assertThat(sizeNow(store)).isEqualTo(1);
    assertThat(other.take(List.of(B)).join()).contains(USAGE);
    assertThat(store.take(List.of(A)).join()).isEmpty();
    assertThat(other.take(List.of(A, B)).join()).isEmpty();
    assertThat(sizeNow(store)).isZero();
  }

  @Test
  void takeUsesTheFirstKeyThatHasAnEntry() throws Exception {
    ContextUsageStore store = store();
    ContextUsage other = new ContextUsage(BigInteger.TWO, Map.of(), BigInteger.ZERO);
    store.put(List.of(B), other).join();
    store.put(List.of(A), USAGE).join();
    assertThat(store.take(List.of(new CorrelationKey(Source.HEADER, "x"), A, B)).join()).contains(USAGE);
    assertThat(store.take(List.of(A, B)).join()).contains(other);
  }

  @Test
  void sourcesDoNotCollide() throws Exception {
    ContextUsageStore store = store();
    store.put(List.of(new CorrelationKey(Source.REQUEST_ID, "1")), USAGE).join();
    assertThat(store.take(List.of(A)).join()).isEmpty();
    assertThat(store.take(List.of(new CorrelationKey(Source.REQUEST_ID, "1"))).join()).contains(USAGE);
  }

  @Test
  void usageRoundTripsExactly() throws Exception {
    ContextUsageStore store = store();
    Map<String, String> details = new LinkedHashMap<>();
    details.put("cached_tokens", "18446744073709551617");
    details.put("audio_tokens", "null");
    details.put("vendor", "{\"a\":[1,2.50,{\"b\":\"\\u00e9\\n\"}],\"c\":1e3}");
    ContextUsage big =
        new ContextUsage(new BigInteger("123456789012345678901234567890"), details, new BigInteger("18446744073709551617"));
    ContextUsageStore other = replicaOf(store);
    store.put(List.of(new CorrelationKey(Source.SGLANG, "10.0.0.7:8998/42")), big).join();
    ContextUsage back = other.take(List.of(new CorrelationKey(Source.SGLANG, "10.0.0.7:8998/42"))).join().orElseThrow();
    assertThat(back).isEqualTo(big);
    assertThat(List.copyOf(back.details().keySet())).containsExactly("cached_tokens", "audio_tokens", "vendor");
  }

  /** Anthropic context usage: the cache creation count round-trips, and its absence too. */
  @Test
  void cacheCreationRoundTripsExactly() throws Exception {
    ContextUsageStore store = store();
    ContextUsageStore other = replicaOf(store);
    ContextUsage stated =
        new ContextUsage(BigInteger.valueOf(160), Map.of("cached_tokens", "50"), BigInteger.valueOf(50), new BigInteger("18446744073709551617"));
    ContextUsage none = new ContextUsage(BigInteger.valueOf(160), Map.of(), BigInteger.ZERO, null);
    store.put(List.of(new CorrelationKey(Source.REQUEST_ID, "anthropic-1")), stated).join();
    store.put(List.of(new CorrelationKey(Source.REQUEST_ID, "anthropic-2")), none).join();
    assertThat(other.take(List.of(new CorrelationKey(Source.REQUEST_ID, "anthropic-1"))).join()).contains(stated);
    assertThat(other.take(List.of(new CorrelationKey(Source.REQUEST_ID, "anthropic-2"))).join()).contains(none);
  }

  @Test
  void entriesExpireAfterTtl() throws Exception {
    ContextUsageStore store = open(Duration.ofMillis(300));
    store.put(List.of(A, B), USAGE).join();
    Thread.sleep(500);
    assertThat(store.take(List.of(A)).join()).isEmpty();
    assertThat(store.take(List.of(B)).join()).isEmpty();
    assertThat(sizeNow(store)).isZero();
  }

  @Test
  void waiterIsWokenByAPutOnAnotherReplicaAndConsumesIt() throws Exception {
    ContextUsageStore store = store();
    ContextUsageStore other = replicaOf(store);
    CompletableFuture<Optional<ContextUsage>> waiting = store.await(List.of(A), Duration.ofSeconds(5));
    assertThat(waiting).isNotDone();
    assertThat(store.waiters()).isEqualTo(1);
    other.put(List.of(B, A), USAGE).join();
    assertThat(waiting.get(5, TimeUnit.SECONDS)).contains(USAGE);
    assertThat(store.waiters()).isZero();
    assertThat(other.take(List.of(B)).join()).isEmpty();
    assertThat(sizeNow(store)).isZero();
  }

  @Test
  void awaitReturnsAnEntryAlreadyThere() throws Exception {
    ContextUsageStore store = store();
    replicaOf(store).put(List.of(A), USAGE).join();
    assertThat(store.await(List.of(A), Duration.ofSeconds(5)).get(5, TimeUnit.SECONDS)).contains(USAGE);
    assertThat(store.waiters()).isZero();
  }

  @Test
  void awaitTimesOutEmptyAndLeavesNoWaiter() throws Exception {
    ContextUsageStore store = store();
    long start = System.nanoTime();
    CompletableFuture<Optional<ContextUsage>> waiting = store.await(List.of(A), Duration.ofMillis(100));
    assertThat(waiting.get(5, TimeUnit.SECONDS)).isEmpty();
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isGreaterThanOrEqualTo(Duration.ofMillis(90));
    assertThat(store.waiters()).isZero();
    store.put(List.of(A), USAGE).join();
    assertThat(sizeNow(store)).isEqualTo(1);
  }

  @Test
  void cancelledWaiterIsWithdrawn() throws Exception {
    ContextUsageStore store = store();
    CompletableFuture<Optional<ContextUsage>> waiting = store.await(List.of(A), Duration.ofSeconds(5));
    waiting.cancel(false);
    assertThat(store.waiters()).isZero();
    replicaOf(store).put(List.of(A), USAGE).join();
    assertThat(store.take(List.of(A)).join()).contains(USAGE);
  }

  @Test
  void twoWaitersOnOneKeyGetAtMostOneEntry() throws Exception {
    ContextUsageStore store = store();
    ContextUsageStore other = replicaOf(store);
    var first = store.await(List.of(A), Duration.ofMillis(500));
    var second = other.await(List.of(A), Duration.ofMillis(500));
    var third = store.await(List.of(A), Duration.ofMillis(500));
    replicaOf(store).put(List.of(A), USAGE).join();
    List<Optional<ContextUsage>> results = new ArrayList<>();
    for (var f : List.of(first, second, third)) {
      results.add(f.get(5, TimeUnit.SECONDS));
    }
    assertThat(results.stream().filter(Optional::isPresent)).hasSize(1);
    assertThat(results.stream().flatMap(Optional::stream)).containsExactly(USAGE);
    assertThat(store.waiters() + other.waiters()).isZero();
  }

  @Test
  void concurrentTakesOnTwoReplicasConsumeEachEntryOnce() throws Exception {
    ContextUsageStore store = store();
    ContextUsageStore other = replicaOf(store);
    int n = 200;
    for (int i = 0; i < n; i++) {
      store.put(List.of(new CorrelationKey(Source.HEADER, "k" + i), new CorrelationKey(Source.REQUEST_ID, "r" + i)), USAGE)
          .join();
    }
    List<CompletableFuture<Optional<ContextUsage>>> takes = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      takes.add(store.take(List.of(new CorrelationKey(Source.HEADER, "k" + i))));
      takes.add(other.take(List.of(new CorrelationKey(Source.REQUEST_ID, "r" + i))));
    }
    long found = 0;
    for (var t : takes) {
      found += t.get(10, TimeUnit.SECONDS).isPresent() ? 1 : 0;
    }
    assertThat(found).isEqualTo(n);
    assertThat(sizeNow(store)).isZero();
  }

  @Test
  void emptyKeyListsNeitherStoreNorWait() throws Exception {
    ContextUsageStore store = store();
    store.put(List.of(), USAGE).join();
    assertThat(sizeNow(store)).isZero();
    assertThat(store.await(List.of(), Duration.ofSeconds(5)).get(1, TimeUnit.SECONDS)).isEmpty();
    assertThat(store.waiters()).isZero();
  }
}
