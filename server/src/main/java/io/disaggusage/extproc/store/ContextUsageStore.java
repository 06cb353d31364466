package io.disaggusage.extproc.store;

import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.usage.ContextUsage;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * Holds context usage from the moment a context response ends until its generation exchange takes it.
 * Every method is non-blocking: callers chain on the returned futures, never wait on them.
 *
 * <p>Semantics every implementation keeps (behaviour.md §4): an entry is stored under several alias
 * keys at once and consumed as a whole, at most once; entries expire after the store's TTL; a waiter is
 * woken by the put that satisfies it, not by polling.
 */
public interface ContextUsageStore extends AutoCloseable {

  /**
   * Stores {@code usage} under every key. The future completes once a later {@link #take} on any
   * replica is guaranteed to see the entry; a context exchange answers its last body message only then.
   */
  CompletableFuture<Void> put(List<CorrelationKey> keys, ContextUsage usage);

  /**
   * Atomically removes and returns the entry stored under the first of {@code keys} that has one (with
   * all its aliases), or empty when none has. Never waits for a future put.
   */
  CompletableFuture<Optional<ContextUsage>> take(List<CorrelationKey> keys);

  /**
   * Like {@link #take}, but when no entry is there yet, waits until a put for any of {@code keys}
   * lands or {@code timeout} passes; then completes empty. Cancelling the future withdraws the waiter.
   */
  CompletableFuture<Optional<ContextUsage>> await(List<CorrelationKey> keys, Duration timeout);

  /** Entries currently held (aliases of one entry count once); for metrics. */
  long size();

  /** Waiters currently registered; for leak checks in tests and metrics. */
  int waiters();

  /**
   * True while the store can take puts and lookups; {@code /readyz} answers 503 otherwise. A store backed
   * by a remote service reports its connection state here; the in-process store is always ready.
   */
  default boolean isReady() {
    return true;
  }

  @Override
  void close();
}
