package io.disaggusage.extproc.stream;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * Bounds the generation exchanges that wait for their context usage at the same time
 * ({@code limits.max_waiters}). Each wait holds one permit from its start until its future completes
 * (context landed, deadline passed, failed or cancelled), so a flood of generation-first streams
 * cannot pile up waiters, timers and held bytes without limit.
 */
final class WaitLimiter {
  private final int max;
  private final AtomicInteger waiting = new AtomicInteger();

  WaitLimiter(int max) {
    this.max = max;
  }

  /** Takes a permit; false when {@code max} exchanges already wait. */
  boolean tryAcquire() {
    while (true) {
      int now = waiting.get();
      if (now >= max) {
        return false;
      }
      if (waiting.compareAndSet(now, now + 1)) {
        return true;
      }
    }
  }

  void release() {
    waiting.decrementAndGet();
  }

  /** Exchanges waiting now. */
  int waiting() {
    return waiting.get();
  }
}
