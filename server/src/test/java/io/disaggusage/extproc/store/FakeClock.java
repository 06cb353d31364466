package io.disaggusage.extproc.store;

import com.github.benmanes.caffeine.cache.Ticker;
import java.time.Duration;
import java.util.Comparator;
import java.util.PriorityQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.FutureTask;

/**
 * A clock that moves only when a test says so: the ticker entries age by and the timer await deadlines
 * run on. {@link #advance} runs every deadline that falls due, in order, on the calling thread, so a test
 * states exactly how much time passed and what ran meanwhile. Deadlines may be scheduled from any thread.
 */
final class FakeClock implements Ticker, ContextWaiters.Deadlines {
  private record Due(long at, long order, FutureTask<Void> task) {}

  private final PriorityQueue<Due> pending =
      new PriorityQueue<>(Comparator.comparingLong(Due::at).thenComparingLong(Due::order));
  private long now;
  private long scheduled;

  @Override
  public synchronized long read() {
    return now;
  }

  @Override
  public synchronized Future<?> schedule(Runnable deadline, Duration delay) {
    FutureTask<Void> task = new FutureTask<>(deadline, null);
    pending.add(new Due(now + delay.toNanos(), scheduled++, task));
    return task;
  }

  /** Moves the clock by {@code elapsed}, running each deadline due by then at its own time. */
  void advance(Duration elapsed) {
    long until;
    synchronized (this) {
      until = now + elapsed.toNanos();
    }
    while (true) {
      FutureTask<Void> task;
      synchronized (this) {
        Due next = pending.peek();
        if (next == null || next.at() > until) {
          now = until;
          return;
        }
        pending.poll();
        now = Math.max(now, next.at());
        task = next.task();
      }
      task.run(); // outside the lock: a deadline may schedule another; a cancelled one does nothing
      if (!task.isCancelled()) {
        try {
          task.get(); // a deadline that threw fails the test here, not silently
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new AssertionError(e);
        } catch (ExecutionException e) {
          throw new AssertionError("a deadline failed", e.getCause());
        }
      }
    }
  }

  /** Deadlines scheduled and neither run nor cancelled. */
  synchronized long pending() {
    return pending.stream().filter(d -> !d.task().isCancelled()).count();
  }
}
