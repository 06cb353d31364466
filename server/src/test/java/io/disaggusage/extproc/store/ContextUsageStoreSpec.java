package io.disaggusage.extproc.store;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.classify.CorrelationKey.Source;
import io.disaggusage.extproc.classify.PromptFingerprint;
import io.disaggusage.extproc.usage.ContextUsage;
import java.math.BigInteger;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
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
 *
 * <p>Most tests store unbound entries (a null fingerprint); the ones at the end bind entries to
 * fingerprints, as the two legs of a flow whose body was read do (issue 16).
 *
 * <p>Time is the {@link #clock}'s: await deadlines run on it, so a test says when they pass, and what a
 * test asserts about ordering it first makes certain with {@link #settle}, never with a pause.
 */
abstract class ContextUsageStoreSpec {
  protected static final Duration LONG_TTL = Duration.ofSeconds(60);

  protected final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
  /** Runs every store's await deadlines (and ages the memory store's entries). */
  protected final FakeClock clock = new FakeClock();
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

  /** Lets {@code elapsed} pass for await deadlines and for the entries' TTL. */
  protected void elapse(Duration elapsed) {
    clock.advance(elapsed);
  }

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

  private final Map<ContextUsageStore, ContextUsageStore> fencePutters = new HashMap<>();
  private int fences;

  /**
   * Returns once {@code store} has handled every wake-up published before the call, and every lookup it
   * started for them has been answered: what a pause only made likely. A fence waiter on {@code store}
   * first sees its own first lookup answered (a later take on the same connection is answered after it),
   * so only a wake-up can end it; a put from another replica then wakes it, and wake-ups arrive in the
   * order they were published, lookups are answered in the order they were sent.
   */
  protected void settle(ContextUsageStore store) throws Exception {
    CorrelationKey fence = new CorrelationKey(Source.HEADER, "fence-" + ++fences);
    PromptFingerprint tag = fingerprint(-1);
    ContextUsageStore putter = fencePutters.get(store);
    if (putter == null) {
      putter = replicaOf(store);
      fencePutters.put(store, putter);
    }
    store.take(List.of(fence), tag).join(); // the take script is loaded: each lookup is one round trip
    CompletableFuture<ContextLookup> fenceWaiter = store.await(List.of(fence), tag, LONG_TTL);
    store.take(List.of(fence), tag).join(); // answered after the fence waiter's own first lookup
    putter.put(List.of(fence), tag, USAGE).join();
    assertThat(fenceWaiter.get(5, TimeUnit.SECONDS)).isEqualTo(ContextLookup.found(USAGE));
  }

  @Test
  void entryUnderAliasesIsConsumedOnce() throws Exception {
    ContextUsageStore store = store();
    ContextUsageStore other = replicaOf(store);
    store.put(List.of(A, B), null, USAGE).join();
    assertThat(sizeNow(store)).isEqualTo(1);
    assertThat(other.take(List.of(B), null).join().usage()).contains(USAGE);
    assertThat(store.take(List.of(A), null).join().usage()).isEmpty();
    assertThat(other.take(List.of(A, B), null).join().usage()).isEmpty();
    assertThat(sizeNow(store)).isZero();
  }

  @Test
  void takeUsesTheFirstKeyThatHasAnEntry() throws Exception {
    ContextUsageStore store = store();
    ContextUsage other = new ContextUsage(BigInteger.TWO, Map.of(), BigInteger.ZERO);
    store.put(List.of(B), null, other).join();
    store.put(List.of(A), null, USAGE).join();
    assertThat(store.take(List.of(new CorrelationKey(Source.HEADER, "x"), A, B), null).join().usage()).contains(USAGE);
    assertThat(store.take(List.of(A, B), null).join().usage()).contains(other);
  }

  @Test
  void sourcesDoNotCollide() throws Exception {
    ContextUsageStore store = store();
    store.put(List.of(new CorrelationKey(Source.REQUEST_ID, "1")), null, USAGE).join();
    assertThat(store.take(List.of(A), null).join().usage()).isEmpty();
    assertThat(store.take(List.of(new CorrelationKey(Source.REQUEST_ID, "1")), null).join().usage()).contains(USAGE);
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
    store.put(List.of(new CorrelationKey(Source.SGLANG, "10.0.0.7:8998/42")), null, big).join();
    ContextUsage back = other.take(List.of(new CorrelationKey(Source.SGLANG, "10.0.0.7:8998/42")), null).join().usage().orElseThrow();
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
    store.put(List.of(new CorrelationKey(Source.REQUEST_ID, "anthropic-1")), null, stated).join();
    store.put(List.of(new CorrelationKey(Source.REQUEST_ID, "anthropic-2")), null, none).join();
    assertThat(other.take(List.of(new CorrelationKey(Source.REQUEST_ID, "anthropic-1")), null).join().usage()).contains(stated);
    assertThat(other.take(List.of(new CorrelationKey(Source.REQUEST_ID, "anthropic-2")), null).join().usage()).contains(none);
  }

  @Test
  void entriesExpireAfterTtl() throws Exception {
    ContextUsageStore store = open(Duration.ofMillis(300));
    store.put(List.of(A, B), null, USAGE).join();
    elapse(Duration.ofMillis(500));
    assertThat(store.take(List.of(A), null).join().usage()).isEmpty();
    assertThat(store.take(List.of(B), null).join().usage()).isEmpty();
    assertThat(sizeNow(store)).isZero();
  }

  @Test
  void waiterIsWokenByAPutOnAnotherReplicaAndConsumesIt() throws Exception {
    ContextUsageStore store = store();
    ContextUsageStore other = replicaOf(store);
    CompletableFuture<ContextLookup> waiting = store.await(List.of(A), null, Duration.ofSeconds(5));
    assertThat(waiting).isNotDone();
    assertThat(store.waiters()).isEqualTo(1);
    other.put(List.of(B, A), null, USAGE).join();
    assertThat(waiting.get(5, TimeUnit.SECONDS).usage()).contains(USAGE);
    assertThat(store.waiters()).isZero();
    assertThat(other.take(List.of(B), null).join().usage()).isEmpty();
    assertThat(sizeNow(store)).isZero();
  }

  @Test
  void awaitReturnsAnEntryAlreadyThere() throws Exception {
    ContextUsageStore store = store();
    replicaOf(store).put(List.of(A), null, USAGE).join();
    assertThat(store.await(List.of(A), null, Duration.ofSeconds(5)).get(5, TimeUnit.SECONDS).usage()).contains(USAGE);
    assertThat(store.waiters()).isZero();
  }

  @Test
  void awaitTimesOutEmptyAndLeavesNoWaiter() throws Exception {
    ContextUsageStore store = store();
    CompletableFuture<ContextLookup> waiting = store.await(List.of(A), null, Duration.ofMillis(100));
    settle(store);
    elapse(Duration.ofMillis(100).minusNanos(1));
    assertThat(waiting).isNotDone();
    assertThat(store.waiters()).isEqualTo(1);
    elapse(Duration.ofNanos(1));
    assertThat(waiting.get(5, TimeUnit.SECONDS)).isEqualTo(ContextLookup.MISS);
    assertThat(store.waiters()).isZero();
    store.put(List.of(A), null, USAGE).join();
    assertThat(sizeNow(store)).isEqualTo(1);
  }

  @Test
  void cancelledWaiterIsWithdrawn() throws Exception {
    ContextUsageStore store = store();
    CompletableFuture<ContextLookup> waiting = store.await(List.of(A), null, Duration.ofSeconds(5));
    waiting.cancel(false);
    assertThat(store.waiters()).isZero();
    replicaOf(store).put(List.of(A), null, USAGE).join();
    assertThat(store.take(List.of(A), null).join().usage()).contains(USAGE);
  }

  @Test
  void twoWaitersOnOneKeyGetAtMostOneEntry() throws Exception {
    ContextUsageStore store = store();
    ContextUsageStore other = replicaOf(store);
    var first = store.await(List.of(A), null, Duration.ofMillis(500));
    var second = other.await(List.of(A), null, Duration.ofMillis(500));
    var third = store.await(List.of(A), null, Duration.ofMillis(500));
    replicaOf(store).put(List.of(A), null, USAGE).join();
    settle(store); // every waiter woken by the put has looked
    settle(other);
    elapse(Duration.ofMillis(500));
    List<Optional<ContextUsage>> results = new ArrayList<>();
    for (var f : List.of(first, second, third)) {
      results.add(f.get(5, TimeUnit.SECONDS).usage());
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
      store.put(List.of(new CorrelationKey(Source.HEADER, "k" + i), new CorrelationKey(Source.REQUEST_ID, "r" + i)), null, USAGE)
          .join();
    }
    List<CompletableFuture<ContextLookup>> takes = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      takes.add(store.take(List.of(new CorrelationKey(Source.HEADER, "k" + i)), null));
      takes.add(other.take(List.of(new CorrelationKey(Source.REQUEST_ID, "r" + i)), null));
    }
    long found = 0;
    for (var t : takes) {
      found += t.get(10, TimeUnit.SECONDS).isFound() ? 1 : 0;
    }
    assertThat(found).isEqualTo(n);
    assertThat(sizeNow(store)).isZero();
  }

  @Test
  void emptyKeyListsNeitherStoreNorWait() throws Exception {
    ContextUsageStore store = store();
    store.put(List.of(), null, USAGE).join();
    assertThat(sizeNow(store)).isZero();
    assertThat(store.await(List.of(), null, Duration.ofSeconds(5)).get(1, TimeUnit.SECONDS).usage()).isEmpty();
    assertThat(store.waiters()).isZero();
  }

  // ---------------------------------------------------------------------------------------------
  // Entries bound to (key, fingerprint)

  static final PromptFingerprint FP_A = fingerprint(1);
  static final PromptFingerprint FP_B = fingerprint(2);
  static final ContextUsage USAGE_A =
      new ContextUsage(BigInteger.valueOf(120), Map.of("cached_tokens", "64"), BigInteger.valueOf(64));
  static final ContextUsage USAGE_B =
      new ContextUsage(BigInteger.valueOf(610), Map.of("cached_tokens", "0"), BigInteger.ZERO);

  static PromptFingerprint fingerprint(long n) {
    return new PromptFingerprint(n, ~n);
  }

  @Test
  void flowsSharingAKeyEachFindTheirOwnUsage() throws Exception {
    ContextUsageStore store = store();
    ContextUsageStore other = replicaOf(store);
    store.put(List.of(A), FP_A, USAGE_A).join();
    store.put(List.of(A), FP_B, USAGE_B).join();
    assertThat(sizeNow(store)).isEqualTo(2);
    assertThat(other.take(List.of(A), FP_A).join()).isEqualTo(ContextLookup.found(USAGE_A));
    assertThat(other.take(List.of(A), FP_B).join()).isEqualTo(ContextLookup.found(USAGE_B));
    assertThat(store.take(List.of(A), FP_A).join()).isEqualTo(ContextLookup.MISS);
    assertThat(sizeNow(store)).isZero();
  }

  @Test
  void anotherFingerprintIsAMismatchAndLeavesTheEntry() throws Exception {
    ContextUsageStore store = store();
    ContextUsageStore other = replicaOf(store);
    store.put(List.of(A, B), FP_A, USAGE_A).join();
    assertThat(other.take(List.of(B), FP_B).join()).isEqualTo(ContextLookup.MISMATCH);
    assertThat(other.take(List.of(new CorrelationKey(Source.HEADER, "x"), A), FP_B).join())
        .isEqualTo(ContextLookup.MISMATCH);
    assertThat(other.take(List.of(new CorrelationKey(Source.HEADER, "x")), FP_B).join())
        .isEqualTo(ContextLookup.MISS);
    assertThat(other.take(List.of(A), FP_A).join()).isEqualTo(ContextLookup.found(USAGE_A));
    assertThat(other.take(List.of(B), FP_B).join()).isEqualTo(ContextLookup.MISS);
  }

  /** A leg whose body was not read (no fingerprint) and a leg with one never match, either way round. */
  @Test
  void anUnboundLegMatchesOnlyAnUnboundLeg() throws Exception {
    ContextUsageStore store = store();
    ContextUsageStore other = replicaOf(store);
    store.put(List.of(A), null, USAGE_A).join();
    store.put(List.of(B), FP_B, USAGE_B).join();
    assertThat(other.take(List.of(A), FP_A).join()).isEqualTo(ContextLookup.MISMATCH);
    assertThat(other.take(List.of(B), null).join()).isEqualTo(ContextLookup.MISMATCH);
    assertThat(other.take(List.of(A), null).join()).isEqualTo(ContextLookup.found(USAGE_A));
    assertThat(other.take(List.of(B), FP_B).join()).isEqualTo(ContextLookup.found(USAGE_B));
  }

  @Test
  void aWaiterIsWokenOnlyByAPutWithItsFingerprint() throws Exception {
    ContextUsageStore store = store();
    ContextUsageStore other = replicaOf(store);
    CompletableFuture<ContextLookup> waitingA = store.await(List.of(A), FP_A, Duration.ofSeconds(5));
    CompletableFuture<ContextLookup> waitingB = other.await(List.of(A), FP_B, Duration.ofSeconds(5));
    store.put(List.of(A), FP_B, USAGE_B).join();
    assertThat(waitingB.get(5, TimeUnit.SECONDS)).isEqualTo(ContextLookup.found(USAGE_B));
    settle(store); // the wake-up for B reached A's replica: it must not have ended A's wait
    assertThat(waitingA).isNotDone();
    other.put(List.of(B, A), FP_A, USAGE_A).join();
    assertThat(waitingA.get(5, TimeUnit.SECONDS)).isEqualTo(ContextLookup.found(USAGE_A));
    assertThat(store.waiters() + other.waiters()).isZero();
    assertThat(sizeNow(store)).isZero();
  }

  @Test
  void aWaitThatSawOnlyAnotherFingerprintEndsAsAMismatch() throws Exception {
    ContextUsageStore store = store();
    ContextUsageStore other = replicaOf(store);
    CompletableFuture<ContextLookup> waiting = store.await(List.of(A), FP_A, Duration.ofMillis(400));
    other.put(List.of(A), FP_B, USAGE_B).join();
    settle(store);
    assertThat(waiting).isNotDone();
    elapse(Duration.ofMillis(400));
    assertThat(waiting.get(5, TimeUnit.SECONDS)).isEqualTo(ContextLookup.MISMATCH);
    assertThat(store.waiters()).isZero();
    assertThat(other.take(List.of(A), FP_B).join()).isEqualTo(ContextLookup.found(USAGE_B));
  }

  @Test
  void aWaitOnAKeyAlreadyHoldingAnotherFingerprintEndsAsAMismatch() throws Exception {
    ContextUsageStore store = store();
    replicaOf(store).put(List.of(A), FP_B, USAGE_B).join();
    CompletableFuture<ContextLookup> underA = store.await(List.of(A), FP_A, Duration.ofMillis(100));
    CompletableFuture<ContextLookup> underB = store.await(List.of(B), FP_A, Duration.ofMillis(100));
    settle(store); // both first lookups were answered
    elapse(Duration.ofMillis(100));
    assertThat(underA.get(5, TimeUnit.SECONDS)).isEqualTo(ContextLookup.MISMATCH);
    assertThat(underB.get(5, TimeUnit.SECONDS)).isEqualTo(ContextLookup.MISS);
    assertThat(store.waiters()).isZero();
  }

  @Test
  void aKeyHoldsAtMostItsCapOfFingerprintsAndLosesTheOldestFirst() throws Exception {
    ContextUsageStore store = store();
    ContextUsageStore other = replicaOf(store);
    int cap = ContextUsageStore.ENTRIES_PER_KEY;
    for (int i = 0; i <= cap; i++) {
      store.put(List.of(A), fingerprint(100 + i), USAGE).join();
    }
    store.put(List.of(B), fingerprint(100), USAGE_B).join(); // another key's entries are not counted
    assertThat(other.take(List.of(A), fingerprint(100)).join()).isEqualTo(ContextLookup.MISMATCH);
    for (int i = 1; i <= cap; i++) {
      assertThat(other.take(List.of(A), fingerprint(100 + i)).join()).as("fingerprint %d", i).isEqualTo(ContextLookup.found(USAGE));
    }
    assertThat(other.take(List.of(B), fingerprint(100)).join()).isEqualTo(ContextLookup.found(USAGE_B));
  }

  @Test
  void expiredEntriesOfOtherFingerprintsMakeAMissNotAMismatch() throws Exception {
    ContextUsageStore store = open(Duration.ofMillis(300));
    store.put(List.of(A), FP_A, USAGE_A).join();
    store.put(List.of(A), FP_B, USAGE_B).join();
    elapse(Duration.ofMillis(500));
    assertThat(store.take(List.of(A), FP_A).join()).isEqualTo(ContextLookup.MISS);
    assertThat(store.take(List.of(A), FP_B).join()).isEqualTo(ContextLookup.MISS);
    assertThat(sizeNow(store)).isZero();
  }

  @Test
  void theSameFlowStoredTwiceUnderOneKeyKeepsTheNewerUsage() throws Exception {
    ContextUsageStore store = store();
    store.put(List.of(A), FP_A, USAGE).join();
    store.put(List.of(A), FP_A, USAGE_A).join(); // a retried context leg
    assertThat(replicaOf(store).take(List.of(A), FP_A).join()).isEqualTo(ContextLookup.found(USAGE_A));
    assertThat(store.take(List.of(A), FP_A).join()).isEqualTo(ContextLookup.MISS);
  }
}
