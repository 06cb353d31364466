package io.disaggusage.extproc.store;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.store.ContextWaiters.Waiter;
import io.disaggusage.extproc.usage.ContextUsage;
import java.math.BigInteger;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** The waiter registry both stores share: registration, matching, marking, deadlines and every way a waiter ends. */
class ContextWaitersTest {
  private static final String FP_A = "0000000000000001fffffffffffffffe";
  private static final String FP_B = "0000000000000002fffffffffffffffd";
  private static final ContextUsage USAGE =
      new ContextUsage(BigInteger.TEN, Map.of("cached_tokens", "3"), BigInteger.valueOf(3));
  private static final Duration TIMEOUT = Duration.ofMillis(100);

  private final FakeClock clock = new FakeClock();
  private final ContextWaiters waiters = new ContextWaiters(clock);

  @Test
  void aWaiterUnderSeveralKeysCountsOnceAndIsFoundUnderEach() {
    Waiter waiter = waiters.register(List.of("k1", "k2"), FP_A);
    assertThat(waiters.size()).isEqualTo(1);
    assertThat(waiters.firstFor("k1", FP_A)).isSameAs(waiter);
    assertThat(waiters.firstFor("k2", FP_A)).isSameAs(waiter);
    assertThat(waiters.firstFor("k3", FP_A)).isNull();
    assertThat(waiter.keys()).containsExactly("k1", "k2");
    assertThat(waiter.fingerprint()).isEqualTo(FP_A);
    assertThat(waiter.isDone()).isFalse();
  }

  @Test
  void firstForTakesTheOldestOfItsFingerprintAndMarksEveryOtherFingerprintUnderTheKey() {
    Waiter otherBefore = waiters.register(List.of("k"), FP_B);
    Waiter first = waiters.register(List.of("k"), FP_A);
    Waiter second = waiters.register(List.of("k"), FP_A);
    Waiter otherAfter = waiters.register(List.of("k"), FP_B);
    Waiter elsewhere = waiters.register(List.of("j"), FP_B);

    assertThat(waiters.firstFor("k", FP_A)).isSameAs(first);
    assertThat(otherBefore.sawOtherFingerprint()).isTrue();
    assertThat(otherAfter.sawOtherFingerprint()).isTrue();
    assertThat(first.sawOtherFingerprint()).isFalse();
    assertThat(second.sawOtherFingerprint()).isFalse();
    assertThat(elsewhere.sawOtherFingerprint()).isFalse();
  }

  @Test
  void firstForOnAKeyWithoutAMatchStillMarksTheOthers() {
    Waiter other = waiters.register(List.of("k"), FP_B);
    assertThat(waiters.firstFor("k", FP_A)).isNull();
    assertThat(other.sawOtherFingerprint()).isTrue();
  }

  @Test
  void wakeReturnsEachMatchingWaiterOnceInKeyOrderAndMarksTheOthers() {
    Waiter onBoth = waiters.register(List.of("k1", "k2"), FP_A);
    Waiter onSecond = waiters.register(List.of("k2"), FP_A);
    Waiter other = waiters.register(List.of("k2"), FP_B);
    Waiter elsewhere = waiters.register(List.of("k3"), FP_B);

    assertThat(waiters.wake(List.of("k1", "k2"), FP_A)).containsExactly(onBoth, onSecond);
    assertThat(other.sawOtherFingerprint()).isTrue();
    assertThat(elsewhere.sawOtherFingerprint()).isFalse();
    assertThat(onBoth.sawOtherFingerprint()).isFalse();
    assertThat(onBoth.isDone()).isFalse(); // waking is not delivering
    assertThat(waiters.wake(List.of("none"), FP_A)).isEmpty();
  }

  @Test
  void deliverHandsTheUsageToTheFirstWaiterStillWaitingAndMarksNobody() {
    Waiter cancelled = waiters.register(List.of("k1"), FP_A);
    Waiter other = waiters.register(List.of("k1"), FP_B);
    Waiter onSecondKey = waiters.register(List.of("k2"), FP_A);
    Waiter later = waiters.register(List.of("k2"), FP_A);
    cancelled.future().cancel(false);

    assertThat(waiters.deliver(List.of("k1", "k2"), FP_A, USAGE)).isTrue();
    assertThat(onSecondKey.future()).isCompletedWithValue(ContextLookup.found(USAGE));
    assertThat(later.isDone()).isFalse();
    assertThat(other.sawOtherFingerprint()).isFalse();
    assertThat(waiters.size()).isEqualTo(2);
  }

  @Test
  void deliverWithoutAWaiterOfTheFingerprintHandsNothing() {
    Waiter other = waiters.register(List.of("k"), FP_B);
    assertThat(waiters.deliver(List.of("k", "j"), FP_A, USAGE)).isFalse();
    assertThat(other.isDone()).isFalse();
  }

  @Test
  void aFinishedWaiterIsWithdrawnBeforeAnyoneSeesItsResult() {
    Waiter waiter = waiters.register(List.of("k1", "k2"), FP_A);
    AtomicInteger seenWaiting = new AtomicInteger(-1);
    waiter.future().thenRun(() -> seenWaiting.set(waiters.size()));

    assertThat(waiter.finish(ContextLookup.found(USAGE))).isTrue();
    assertThat(seenWaiting).hasValue(0);
    assertThat(waiters.firstFor("k1", FP_A)).isNull();
    assertThat(waiters.firstFor("k2", FP_A)).isNull();
    assertThat(waiter.finish(ContextLookup.MISS)).as("a second end").isFalse();
    assertThat(waiter.future()).isCompletedWithValue(ContextLookup.found(USAGE));
  }

  @Test
  void aFailedWaiterIsWithdrawnAndItsFutureFails() {
    Waiter waiter = waiters.register(List.of("k"), FP_A);
    IllegalStateException error = new IllegalStateException("redis down");
    waiter.fail(error);
    assertThat(waiter.future()).isCompletedExceptionally();
    assertThat(waiter.future().handle((r, e) -> e).join()).isSameAs(error);
    assertThat(waiters.size()).isZero();
  }

  @Test
  void cancellingTheFutureWithdrawsTheWaiterAndItsDeadline() {
    Waiter waiter = waiters.register(List.of("k"), FP_A);
    waiters.expireAfter(waiter, TIMEOUT, w -> ContextLookup.MISS);
    assertThat(clock.pending()).isEqualTo(1);

    waiter.future().cancel(false);
    assertThat(waiters.size()).isZero();
    assertThat(waiters.firstFor("k", FP_A)).isNull();
    assertThat(clock.pending()).isZero();
  }

  @Test
  void theDeadlineEndsTheWaitExactlyAtItsTimeWithTheVerdictAskedAfterWithdrawal() {
    Waiter waiter = waiters.register(List.of("k"), FP_A);
    AtomicInteger waitingAtVerdict = new AtomicInteger(-1);
    waiters.expireAfter(
        waiter,
        TIMEOUT,
        w -> {
          waitingAtVerdict.set(waiters.size());
          return ContextLookup.notFound(w.sawOtherFingerprint());
        });

    clock.advance(TIMEOUT.minusNanos(1));
    assertThat(waiter.isDone()).isFalse();
    assertThat(waiters.size()).isEqualTo(1);
    clock.advance(Duration.ofNanos(1));
    assertThat(waiter.future()).isCompletedWithValue(ContextLookup.MISS);
    assertThat(waitingAtVerdict).hasValue(0);
    assertThat(waiters.size()).isZero();
  }

  @Test
  void aWaiterThatLearnedItsKeyIsSharedEndsAsAMismatchAtItsDeadline() {
    Waiter waiter = waiters.register(List.of("k"), FP_A);
    waiters.expireAfter(waiter, TIMEOUT, w -> ContextLookup.notFound(w.sawOtherFingerprint()));
    waiters.wake(List.of("k"), FP_B);
    clock.advance(TIMEOUT);
    assertThat(waiter.future()).isCompletedWithValue(ContextLookup.MISMATCH);
  }

  @Test
  void markOtherFingerprintIsWhatALookupThatSawOtherEntriesRecords() {
    Waiter waiter = waiters.register(List.of("k"), FP_A);
    waiter.markOtherFingerprint();
    assertThat(waiter.sawOtherFingerprint()).isTrue();
  }

  @Test
  void aWaiterThatEndsBeforeItsDeadlineCancelsIt() {
    Waiter waiter = waiters.register(List.of("k"), FP_A);
    waiters.expireAfter(waiter, TIMEOUT, w -> ContextLookup.MISS);
    assertThat(waiters.deliver(List.of("k"), FP_A, USAGE)).isTrue();
    assertThat(clock.pending()).isZero();
    clock.advance(TIMEOUT.multipliedBy(2));
    assertThat(waiter.future()).isCompletedWithValue(ContextLookup.found(USAGE));
  }

  @Test
  void deadlinesFallDueInTheirOwnOrder() {
    Waiter late = waiters.register(List.of("k"), FP_A);
    Waiter early = waiters.register(List.of("k"), FP_B);
    List<Waiter> ended = new ArrayList<>();
    waiters.expireAfter(late, TIMEOUT.multipliedBy(2), w -> {
      ended.add(w);
      return ContextLookup.MISS;
    });
    waiters.expireAfter(early, TIMEOUT, w -> {
      ended.add(w);
      return ContextLookup.MISS;
    });
    clock.advance(TIMEOUT);
    assertThat(ended).containsExactly(early);
    clock.advance(TIMEOUT);
    assertThat(ended).containsExactly(early, late);
  }

  @Test
  void forEachVisitsEveryWaiterOnceAndCloseEndsThemAll() {
    Waiter one = waiters.register(List.of("k1", "k2"), FP_A);
    Waiter two = waiters.register(List.of("k2"), FP_B);
    waiters.expireAfter(one, TIMEOUT, w -> ContextLookup.MISMATCH);
    List<Waiter> visited = new ArrayList<>();
    waiters.forEach(visited::add);
    assertThat(visited).containsExactlyInAnyOrder(one, two);

    waiters.close(ContextLookup.MISS);
    assertThat(one.future()).isCompletedWithValue(ContextLookup.MISS);
    assertThat(two.future()).isCompletedWithValue(ContextLookup.MISS);
    assertThat(waiters.size()).isZero();
    assertThat(clock.pending()).isZero();
  }

  @Test
  void deadlinesOnAScheduledExecutorRunThere() throws Exception {
    ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
    try {
      ContextWaiters onTimer = new ContextWaiters(ContextWaiters.Deadlines.on(timer));
      Waiter waiter = onTimer.register(List.of("k"), FP_A);
      AtomicReference<Thread> ranOn = new AtomicReference<>();
      onTimer.expireAfter(waiter, Duration.ofNanos(1), w -> {
        ranOn.set(Thread.currentThread());
        return ContextLookup.MISS;
      });
      assertThat(waiter.future().get(5, TimeUnit.SECONDS)).isEqualTo(ContextLookup.MISS);
      assertThat(ranOn.get()).isNotSameAs(Thread.currentThread());
      assertThat(onTimer.size()).isZero();
    } finally {
      timer.shutdownNow();
    }
  }

  /** Registrations and ends from many threads at once leave nothing behind and end each waiter once. */
  @Test
  void concurrentRegistrationsAndEndsLeaveNoWaiter() throws Exception {
    int threads = 4;
    int perThread = 2_000;
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    CountDownLatch start = new CountDownLatch(1);
    AtomicInteger delivered = new AtomicInteger();
    List<CompletableFuture<ContextLookup>> futures = java.util.Collections.synchronizedList(new ArrayList<>());
    try {
      List<java.util.concurrent.Future<?>> runs = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        int thread = t;
        runs.add(
            pool.submit(
                () -> {
                  start.await();
                  for (int i = 0; i < perThread; i++) {
                    String key = "k" + (i % 7);
                    Waiter waiter = waiters.register(List.of(key, "shared"), thread % 2 == 0 ? FP_A : FP_B);
                    futures.add(waiter.future());
                    switch (i % 3) {
                      case 0 -> waiter.future().cancel(false);
                      case 1 -> {
                        if (waiters.deliver(List.of(key), waiter.fingerprint(), USAGE)) {
                          delivered.incrementAndGet();
                        }
                      }
                      default -> waiter.finish(ContextLookup.MISS);
                    }
                  }
                  return null;
                }));
      }
      start.countDown();
      for (var run : runs) {
        run.get(30, TimeUnit.SECONDS);
      }
    } finally {
      pool.shutdownNow();
    }
    waiters.close(ContextLookup.MISS); // a delivery may have gone to another thread's waiter
    assertThat(waiters.size()).isZero();
    assertThat(futures).hasSize(threads * perThread).allMatch(CompletableFuture::isDone);
    long found = futures.stream().filter(f -> !f.isCancelled() && f.join().isFound()).count();
    assertThat(found).isEqualTo(delivered.get());
  }
}
