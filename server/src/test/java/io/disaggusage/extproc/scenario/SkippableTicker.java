package io.disaggusage.extproc.scenario;

import com.github.benmanes.caffeine.cache.Ticker;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The system's monotonic clock plus whatever a test skipped: entries age in real time while the service
 * runs, and a test that must see them expire moves the clock past their TTL instead of sleeping through it.
 */
public final class SkippableTicker implements Ticker {
  private final AtomicLong skipped = new AtomicLong();

  @Override
  public long read() {
    return System.nanoTime() + skipped.get();
  }

  /** Moves the clock {@code d} ahead, at once. */
  public void skip(Duration d) {
    skipped.addAndGet(d.toNanos());
  }
}
