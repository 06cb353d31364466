package io.disaggusage.extproc.store;

import java.time.Duration;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.atomic.AtomicInteger;

/** Opening Redis stores in tests: each test namespace gets its own key prefix, and opening waits for readiness. */
public final class RedisStores {
  private static final AtomicInteger NAMESPACES = new AtomicInteger();

  private RedisStores() {}

  /** A key prefix no other test in this JVM uses. */
  public static String freshPrefix() {
    return "test" + ProcessHandle.current().pid() + "-" + NAMESPACES.incrementAndGet() + ":";
  }

  /** Opens a store and waits until it is ready (connected and subscribed). */
  public static RedisContextUsageStore openReady(
      RedisContextUsageStore.Settings settings, ScheduledExecutorService timer) {
    return openReady(settings, timer, ContextWaiters.Deadlines.on(timer));
  }

  /** Like {@link #openReady(RedisContextUsageStore.Settings, ScheduledExecutorService)}, await deadlines on {@code deadlines}. */
  static RedisContextUsageStore openReady(
      RedisContextUsageStore.Settings settings,
      ScheduledExecutorService timer,
      ContextWaiters.Deadlines deadlines) {
    RedisContextUsageStore store = RedisContextUsageStore.open(settings, timer, deadlines);
    try {
      awaitReady(store, Duration.ofSeconds(10));
    } catch (AssertionError e) {
      store.close();
      throw e;
    }
    return store;
  }

  /** Waits until {@code store.isReady()}; fails after {@code limit}. */
  public static void awaitReady(ContextUsageStore store, Duration limit) {
    awaitState(store, true, limit);
  }

  /**
   * Waits until {@code store.isReady()} is {@code ready}; fails after {@code limit}. A bounded poll, on
   * purpose: readiness follows a real Redis process and real sockets, which no fake clock drives, and
   * nothing is asserted about how long it took.
   */
  public static void awaitState(ContextUsageStore store, boolean ready, Duration limit) {
    long deadline = System.nanoTime() + limit.toNanos();
    while (store.isReady() != ready) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("store did not become " + (ready ? "ready" : "not ready") + " within " + limit);
      }
      try {
        Thread.sleep(10); // the poll's interval, not a guess at an ordering
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError(e);
      }
    }
  }
}
