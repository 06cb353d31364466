package io.disaggusage.extproc.store;

import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.usage.ContextUsage;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

/**
 * A store in front of a real one that can be switched, at any moment, to behave like a remote store
 * that is down (every operation fails), slow (every result arrives {@code delay} late, on the timer) or
 * restarted (everything stored so far is gone). Stands in for Redis faults in service-level tests.
 */
public final class FaultyStore implements ContextUsageStore {
  /** What the next operations do. */
  public enum Mode {
    UP,
    DOWN,
    SLOW,
    /** Operations throw instead of returning a future (a client library bug). */
    THROWING
  }

  private final MemoryContextUsageStore real;
  private final ScheduledExecutorService timer;
  private volatile Mode mode = Mode.UP;
  private volatile Duration delay = Duration.ofMillis(500);
  private final AtomicLong failed = new AtomicLong();

  public FaultyStore(MemoryContextUsageStore real, ScheduledExecutorService timer) {
    this.real = real;
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
    real.clearEntries();
  }

  /** Operations that failed because of the fault. */
  public long failed() {
    return failed.get();
  }

  private <T> CompletableFuture<T> apply(Supplier<CompletableFuture<T>> op) {
    return switch (mode) {
      case UP -> op.get();
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
        long nanos = delay.toNanos();
        op.get().whenComplete((v, e) -> timer.schedule(() -> {
          if (e != null) {
            late.completeExceptionally(e);
          } else {
            late.complete(v);
          }
        }, nanos, TimeUnit.NANOSECONDS));
        // Cancelling the late future withdraws nothing from the real store: like a slow remote call.
        yield late;
      }
    };
  }

  @Override
  public CompletableFuture<Void> put(List<CorrelationKey> keys, ContextUsage usage) {
    return apply(() -> real.put(keys, usage));
  }

  @Override
  public CompletableFuture<Optional<ContextUsage>> take(List<CorrelationKey> keys) {
    return apply(() -> real.take(keys));
  }

  @Override
  public CompletableFuture<Optional<ContextUsage>> await(List<CorrelationKey> keys, Duration timeout) {
    if (mode != Mode.SLOW) {
      return apply(() -> real.await(keys, timeout));
    }
    // Slow: the wait itself runs on the real store, so cancelling it withdraws the waiter.
    return real.await(keys, timeout);
  }

  @Override
  public long size() {
    return real.size();
  }

  @Override
  public int waiters() {
    return real.waiters();
  }

  @Override
  public boolean isReady() {
    return mode == Mode.UP || mode == Mode.SLOW;
  }

  @Override
  public void close() {
    real.close();
  }
}
