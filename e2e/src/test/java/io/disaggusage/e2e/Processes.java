package io.disaggusage.e2e;

import java.time.Duration;
import java.util.function.BooleanSupplier;

/**
 * Waiting in a test: for a condition to hold, timed. Starting and signalling processes is
 * {@link io.disaggusage.extproc.testkit.ChildProcess}'s.
 */
final class Processes {
  private Processes() {}

  /** Polls {@code condition} every 10 ms until it holds; fails with {@code what} after {@code timeout}. */
  static void await(String what, Duration timeout, BooleanSupplier condition) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out after " + timeout.toMillis() + " ms waiting for " + what);
      }
      sleepMillis(10);
    }
  }

  /** Polls like {@link #await} and returns how long the condition took to hold. */
  static Duration time(String what, Duration timeout, BooleanSupplier condition) {
    long start = System.nanoTime();
    await(what, timeout, condition);
    return Duration.ofNanos(System.nanoTime() - start);
  }

  static void sleepMillis(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
