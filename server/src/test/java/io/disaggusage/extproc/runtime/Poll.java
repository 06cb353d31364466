package io.disaggusage.extproc.runtime;

import java.time.Duration;

/**
 * Polls a condition until it holds, failing after a limit. Only for what no event announces and a client
 * learns by asking alone: whether a listening socket still accepts connections, whether a separate
 * process (Redis) has become reachable to the store's client.
 */
final class Poll {
  /** A condition checked by asking (an RPC, an HTTP request). */
  interface Check {
    boolean holds() throws Exception;
  }

  private static final Duration INTERVAL = Duration.ofMillis(10);

  private Poll() {}

  static void until(String what, Duration limit, Check condition) throws Exception {
    long deadline = System.nanoTime() + limit.toNanos();
    while (!condition.holds()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("not within " + limit + ": " + what);
      }
      Thread.sleep(INTERVAL.toMillis());
    }
  }
}
