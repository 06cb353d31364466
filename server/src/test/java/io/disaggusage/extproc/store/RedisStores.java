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
    RedisContextUsageStore store = RedisContextUsageStore.open(settings, timer);
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

  /** Waits until {@code store.isReady()} is {@code ready}; fails after {@code limit}. */
  public static void awaitState(ContextUsageStore store, boolean ready, Duration limit) {
    long deadline = System.nanoTime() + limit.toNanos();
    while (store.isReady() != ready) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("store did not become " + (ready ? "ready" : "not ready") + " within " + limit);
      }
      try {
        Thread.sleep(10);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError(e);
      }
    }
  }
}
