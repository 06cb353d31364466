package io.disaggusage.extproc.store;

import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.classify.PromptFingerprint;
import io.disaggusage.extproc.usage.ContextUsage;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

/**
 * A store in front of a real one that can be switched, at any moment, to behave like a remote store
 * that is down (every operation fails), slow (every result arrives {@code delay} late, on the timer),
 * loaded (writes land {@code delay} late) or restarted (everything stored so far is gone). Stands in
 * for Redis faults in service-level tests.
 */
public final class FaultyStore extends ForwardingStore {
  /** What the next operations do. */
  public enum Mode {
    UP,
    DOWN,
    SLOW,
    /**
     * A put reaches the real store {@code delay} late and completes when that write does; reads are
     * prompt, so a lookup made meanwhile misses the entry (a loaded host, a distant Redis).
     */
    LATE_WRITES,
    /** Operations throw instead of returning a future (a client library bug). */
    THROWING,
    /**
     * Nothing lands until the test calls {@link #release()}: a put reaches the real store then, a read's
     * result is delivered then (a store slower than any timer, on the test's cue).
     */
    HELD
  }

  private final ScheduledExecutorService timer;
  private volatile Mode mode = Mode.UP;
  private volatile Duration delay = Duration.ofMillis(500);
  private final AtomicLong failed = new AtomicLong();
  private final CompletableFuture<Void> firstPut = new CompletableFuture<>();
  private final CompletableFuture<Void> firstAwait = new CompletableFuture<>();
  private final Queue<Runnable> held = new ConcurrentLinkedQueue<>();

  /** {@code real}: any store; {@link #restart()} needs the memory store. */
  public FaultyStore(ContextUsageStore real, ScheduledExecutorService timer) {
    super(real);
    this.timer = timer;
  }

  public FaultyStore mode(Mode mode) {
    this.mode = mode;
    return this;
  }

  public FaultyStore delay(Duration delay) {
    this.delay = delay;
    return this;
  }

  /** Loses every entry, as a restarted store without persistence does. Waiters stay registered. */
  public void restart() {
    ((MemoryContextUsageStore) real).clearEntries();
  }

  /** Completes once the first put has been asked for and, if held, queued (whatever the mode). */
  public CompletableFuture<Void> firstPut() {
    return firstPut;
  }

  /** Completes once the first await has reached the real store: its waiter, if it needs one, is registered. */
  public CompletableFuture<Void> firstAwait() {
    return firstAwait;
  }

  /**
   * Lands every operation held so far ({@link Mode#HELD}), on the calling thread: when this returns,
   * whoever was waiting for them has had their results. Returns how many there were.
   */
  public int release() {
    int released = 0;
    for (Runnable r = held.poll(); r != null; r = held.poll()) {
      r.run();
      released++;
    }
    return released;
  }

  /** Operations that failed because of the fault. */
  public long failed() {
    return failed.get();
  }

  private <T> CompletableFuture<T> apply(Supplier<CompletableFuture<T>> op) {
    return switch (mode) {
      case UP -> op.get();
      case LATE_WRITES -> op.get(); // only puts are late, see put()
      case DOWN -> {
        failed.incrementAndGet();
        yield CompletableFuture.failedFuture(new IllegalStateException("store down"));
      }
      case THROWING -> {
        failed.incrementAndGet();
        throw new IllegalStateException("store client bug");
      }
      case SLOW -> {
        CompletableFuture<T> late = new CompletableFuture<>();
        CompletableFuture<T> result = op.get();
        result.whenComplete((v, e) -> later(() -> relay(result, late)));
        // Cancelling the late future withdraws nothing from the real store: like a slow remote call.
        yield late;
      }
      case HELD -> {
        CompletableFuture<T> late = new CompletableFuture<>();
        CompletableFuture<T> result = op.get();
        held.add(() -> relay(result, late));
        yield late;
      }
    };
  }

  @Override
  public CompletableFuture<Void> put(
      List<CorrelationKey> keys, PromptFingerprint fingerprint, ContextUsage usage) {
    try {
      return putIn(mode, keys, fingerprint, usage);
    } finally {
      // Only now: a test woken by this may release() at once, and the write must be there to release.
      firstPut.complete(null);
    }
  }

  private CompletableFuture<Void> putIn(
      Mode current, List<CorrelationKey> keys, PromptFingerprint fingerprint, ContextUsage usage) {
    if (current != Mode.LATE_WRITES && current != Mode.HELD) {
      return apply(() -> real.put(keys, fingerprint, usage));
    }
    CompletableFuture<Void> landed = new CompletableFuture<>();
    Runnable write = () -> relay(real.put(keys, fingerprint, usage), landed);
    if (current == Mode.HELD) {
      held.add(write);
    } else {
      later(write);
    }
    return landed;
  }

  /** Runs {@code task} on the timer, {@code delay} from now. */
  private void later(Runnable task) {
    timer.schedule(task, delay.toNanos(), TimeUnit.NANOSECONDS);
  }

  /** Completes {@code to} as {@code from} completes. */
  private static <T> void relay(CompletableFuture<T> from, CompletableFuture<T> to) {
    from.whenComplete((v, e) -> {
      if (e != null) {
        to.completeExceptionally(e);
      } else {
        to.complete(v);
      }
    });
  }

  @Override
  public CompletableFuture<ContextLookup> take(List<CorrelationKey> keys, PromptFingerprint fingerprint) {
    return apply(() -> real.take(keys, fingerprint));
  }

  @Override
  public CompletableFuture<ContextLookup> await(
      List<CorrelationKey> keys, PromptFingerprint fingerprint, Duration timeout) {
    // Slow: the wait itself runs on the real store, so cancelling it withdraws the waiter.
    CompletableFuture<ContextLookup> result =
        mode != Mode.SLOW ? apply(() -> real.await(keys, fingerprint, timeout)) : real.await(keys, fingerprint, timeout);
    firstAwait.complete(null);
    return result;
  }

  @Override
  public boolean isReady() {
    return (mode == Mode.UP || mode == Mode.SLOW || mode == Mode.LATE_WRITES || mode == Mode.HELD) && real.isReady();
  }
}
