package io.disaggusage.extproc.logging;

import java.time.Duration;
import java.util.Arrays;
import java.util.Objects;
import java.util.function.LongSupplier;
import org.slf4j.Logger;

/**
 * Warnings of one kind, at most {@code permits} per {@code interval}, so a failure that hits every
 * exchange cannot flood the log. The next warning emitted after some were dropped says how many: {@code
 * "... (17 similar warnings suppressed)"}. Thread-safe; the check costs one short critical section.
 */
public final class RateLimitedLog {
  private final Logger logger;
  private final int permits;
  private final long intervalNanos;
  private final LongSupplier nanoClock;

  private boolean started;
  private long windowStart;
  private int used;
  private long suppressed;

  /** At most {@code permits} warnings per {@code interval}, timed by {@link System#nanoTime()}. */
  public RateLimitedLog(Logger logger, int permits, Duration interval) {
    this(logger, permits, interval, System::nanoTime);
  }

  /**
   * As {@link #RateLimitedLog(Logger, int, Duration)} with the clock given.
   *
   * @param nanoClock monotonic nanoseconds, as {@link System#nanoTime()}
   */
  public RateLimitedLog(Logger logger, int permits, Duration interval, LongSupplier nanoClock) {
    if (permits < 1) {
      throw new IllegalArgumentException("permits must be at least 1, got " + permits);
    }
    if (interval.isNegative() || interval.isZero()) {
      throw new IllegalArgumentException("interval must be positive, got " + interval);
    }
    this.logger = Objects.requireNonNull(logger, "logger");
    this.permits = permits;
    this.intervalNanos = interval.toNanos();
    this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
  }

  /**
   * Logs at WARN unless this interval's permits are used up, in which case the warning is only counted.
   *
   * @param format an SLF4J message pattern with {@code {}} placeholders
   * @param args its arguments; a trailing {@link Throwable} is logged as the exception, as in SLF4J
   * @return whether the warning was logged
   */
  public boolean warn(String format, Object... args) {
    if (!logger.isWarnEnabled()) {
      return false;
    }
    long dropped;
    synchronized (this) {
      long now = nanoClock.getAsLong();
      if (!started || now - windowStart >= intervalNanos) {
        started = true;
        windowStart = now;
        used = 0;
      }
      if (used >= permits) {
        suppressed++;
        return false;
      }
      used++;
      dropped = suppressed;
      suppressed = 0;
    }
    if (dropped == 0) {
      logger.warn(format, args);
    } else {
      logger.warn(format + " ({} similar warnings suppressed)", withCount(args, dropped));
    }
    return true;
  }

  /** Warnings counted but not logged since the last one logged. */
  public synchronized long suppressed() {
    return suppressed;
  }

  /** {@code args} with {@code count} inserted after the message arguments, before a trailing throwable. */
  private static Object[] withCount(Object[] args, long count) {
    boolean throwable = args.length > 0 && args[args.length - 1] instanceof Throwable;
    int at = throwable ? args.length - 1 : args.length;
    Object[] out = Arrays.copyOf(args, args.length + 1);
    out[at] = count;
    if (throwable) {
      out[args.length] = args[args.length - 1];
    }
    return out;
  }
}
