package io.disaggusage.extproc.store;

import io.disaggusage.extproc.usage.ContextUsage;
import java.time.Duration;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * The generation legs waiting on this replica for their context usage, shared by both stores. A waiter
 * is registered under every store key of its flow with its fingerprint tag ({@link FingerprintTag}) and
 * ends exactly once: handed its usage, at its deadline, cancelled by its caller, failed, or when the
 * store closes. Whichever way it ends, it is withdrawn from every key before anyone sees the result, so
 * {@link #size()} never counts a finished waiter.
 *
 * <p>What a put or a wake-up does with the waiters (hand the usage over directly, take it from Redis)
 * is the store's logic; this class only finds them, marks the ones that learn their key is shared, and
 * runs their deadlines. The bound on waiters ({@code limits.max_waiters}) is the exchange's, taken before
 * it calls {@link ContextUsageStore#await}.
 *
 * <p>Thread-safe: puts, wake-ups, deadlines and cancellations arrive on any thread.
 */
final class ContextWaiters {

  /**
   * Runs a waiter's deadline after a delay: the store's scheduler in service, a fake clock in tests.
   * The returned future is cancelled when the waiter ends first.
   */
  @FunctionalInterface
  interface Deadlines {
    Future<?> schedule(Runnable deadline, Duration delay);

    /** Deadlines on {@code timer}, at nanosecond precision. */
    static Deadlines on(ScheduledExecutorService timer) {
      return (deadline, delay) -> timer.schedule(deadline, delay.toNanos(), TimeUnit.NANOSECONDS);
    }
  }

  /** A generation leg waiting for context usage with its fingerprint under any of its keys. */
  final class Waiter {
    private final List<String> keys;
    private final String fingerprint;
    private final CompletableFuture<ContextLookup> future = new CompletableFuture<>();
    /** A lookup, put or wake-up showed entries of other fingerprints under the keys while this waited. */
    private volatile boolean sawOtherFingerprint;

    private Waiter(List<String> keys, String fingerprint) {
      this.keys = keys;
      this.fingerprint = fingerprint;
    }

    /** The store keys this waits under, in lookup order. */
    List<String> keys() {
      return keys;
    }

    /** The fingerprint tag this waits for. */
    String fingerprint() {
      return fingerprint;
    }

    /** What the caller of {@link ContextUsageStore#await} holds; cancelling it withdraws the waiter. */
    CompletableFuture<ContextLookup> future() {
      return future;
    }

    boolean isDone() {
      return future.isDone();
    }

    boolean sawOtherFingerprint() {
      return sawOtherFingerprint;
    }

    /** Records that entries of other fingerprints were seen under the keys: the deadline reports a mismatch. */
    void markOtherFingerprint() {
      sawOtherFingerprint = true;
    }

    /**
     * Withdraws, then completes: whoever sees the result sees the waiter gone. False when the waiter had
     * ended already (its deadline, its caller or another put won); the caller then keeps what it offered.
     */
    boolean finish(ContextLookup result) {
      withdraw(this);
      return future.complete(result);
    }

    /** Withdraws, then fails the wait with {@code error}. */
    void fail(Throwable error) {
      withdraw(this);
      future.completeExceptionally(error);
    }
  }

  private final ConcurrentHashMap<String, List<Waiter>> byKey = new ConcurrentHashMap<>();
  private final Set<Waiter> all = ConcurrentHashMap.newKeySet();
  private final Deadlines deadlines;

  ContextWaiters(Deadlines deadlines) {
    this.deadlines = deadlines;
  }

  /**
   * Registers a waiter under every one of {@code keys}, without a deadline yet ({@link #expireAfter}):
   * a store that looks once more after registering starts the deadline only when that look found
   * nothing. However its future ends, the waiter is withdrawn.
   */
  Waiter register(List<String> keys, String fingerprint) {
    Waiter waiter = new Waiter(keys, fingerprint);
    all.add(waiter);
    for (String key : keys) {
      byKey.compute(
          key,
          (k, list) -> {
            List<Waiter> waiting = list == null ? new CopyOnWriteArrayList<>() : list;
            waiting.add(waiter);
            return waiting;
          });
    }
    waiter.future.whenComplete((result, error) -> withdraw(waiter));
    return waiter;
  }

  /**
   * Ends {@code waiter} {@code timeout} from now, unless it ends first, with what {@code verdict} says
   * then. The verdict is asked after the waiter is withdrawn, so no put can hand it usage meanwhile.
   */
  void expireAfter(Waiter waiter, Duration timeout, Function<Waiter, ContextLookup> verdict) {
    Future<?> deadline =
        deadlines.schedule(
            () -> {
              withdraw(waiter);
              waiter.future.complete(verdict.apply(waiter));
            },
            timeout);
    waiter.future.whenComplete((result, error) -> deadline.cancel(false));
  }

  /**
   * The first waiter for {@code fingerprint} under {@code key}, or null. Every other waiter there is
   * marked: a put for another flow reached its key, so that key is shared.
   */
  Waiter firstFor(String key, String fingerprint) {
    List<Waiter> waiting = byKey.get(key);
    if (waiting == null) {
      return null;
    }
    Waiter match = null;
    for (Waiter waiter : waiting) {
      if (waiter.fingerprint.equals(fingerprint)) {
        match = match == null ? waiter : match;
      } else {
        waiter.sawOtherFingerprint = true;
      }
    }
    return match;
  }

  /**
   * Every waiter for {@code fingerprint} under any of {@code keys}, each once, in key order. Every other
   * waiter under those keys is marked, as by {@link #firstFor}.
   */
  Set<Waiter> wake(List<String> keys, String fingerprint) {
    Set<Waiter> woken = new LinkedHashSet<>();
    for (String key : keys) {
      List<Waiter> waiting = byKey.get(key);
      if (waiting == null) {
        continue;
      }
      for (Waiter waiter : waiting) {
        if (waiter.fingerprint.equals(fingerprint)) {
          woken.add(waiter);
        } else {
          waiter.sawOtherFingerprint = true;
        }
      }
    }
    return woken;
  }

  /**
   * Hands {@code usage} to the first waiter for {@code fingerprint} under {@code keys} (in key order) that
   * is still waiting; marks nobody. False when no such waiter took it.
   */
  boolean deliver(List<String> keys, String fingerprint, ContextUsage usage) {
    for (String key : keys) {
      List<Waiter> waiting = byKey.get(key);
      if (waiting == null) {
        continue;
      }
      for (Waiter waiter : waiting) {
        if (waiter.fingerprint.equals(fingerprint) && waiter.finish(ContextLookup.found(usage))) {
          return true;
        }
      }
    }
    return false;
  }

  /** Calls {@code action} for every waiter registered now. */
  void forEach(Consumer<Waiter> action) {
    all.forEach(action);
  }

  /** Waiters registered now; one waiting under several keys counts once. */
  int size() {
    return all.size();
  }

  /** Ends every waiter with {@code result}: the store is closing. */
  void close(ContextLookup result) {
    List.copyOf(all).forEach(waiter -> waiter.finish(result));
  }

  private void withdraw(Waiter waiter) {
    all.remove(waiter);
    for (String key : waiter.keys) {
      byKey.computeIfPresent(
          key,
          (k, list) -> {
            list.remove(waiter);
            return list.isEmpty() ? null : list;
          });
    }
  }
}
