package io.disaggusage.extproc.store;

import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.classify.PromptFingerprint;
import io.disaggusage.extproc.usage.ContextUsage;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * Holds context usage from the moment a context response ends until its generation exchange takes it.
 * Every method is non-blocking: callers chain on the returned futures, never wait on them.
 *
 * <p>Semantics every implementation keeps (behaviour.md §4): an entry is stored under several alias
 * keys at once and consumed as a whole, at most once; entries expire after the store's TTL; a waiter is
 * woken by the put that satisfies it, not by polling.
 *
 * <p>An entry is bound to (key, fingerprint): a lookup finds only an entry stored with its own
 * fingerprint, so flows sharing a key (a fixed {@code X-Request-Id}, a forged context leg) each find
 * their own. A null fingerprint (a leg whose body was not read) is a value of its own: it matches only
 * null. At most {@link #ENTRIES_PER_KEY} fingerprints are held under one key; a put beyond that evicts
 * the oldest.
 */
public interface ContextUsageStore extends AutoCloseable {

  /**
   * Most entries (fingerprints) one key holds at once. Flows that share a key legitimately are few (a
   * fixed client id behind a proxy that does not make it unique); the bound keeps a flood of forged
   * context legs under one key from growing memory without end. A forger can evict a victim's entry
   * this way (the victim's generation passes through), never hand it other numbers.
   */
  int ENTRIES_PER_KEY = 64;

  /**
   * Stores {@code usage} under every key, bound to {@code fingerprint} (null: unbound). The future
   * completes once a later {@link #take} on any replica is guaranteed to see the entry; a context
   * exchange answers its last body message only then.
   */
  CompletableFuture<Void> put(List<CorrelationKey> keys, PromptFingerprint fingerprint, ContextUsage usage);

  /**
   * Atomically removes and returns the entry stored with {@code fingerprint} under the first of {@code
   * keys} that has one (with all its aliases). Otherwise tells whether the keys hold entries of other
   * fingerprints. Never waits for a future put.
   */
  CompletableFuture<ContextLookup> take(List<CorrelationKey> keys, PromptFingerprint fingerprint);

  /**
   * Like {@link #take}, but when no entry is there yet, waits until a put for any of {@code keys} with
   * this {@code fingerprint} lands or {@code timeout} passes. A put with another fingerprint neither
   * satisfies nor ends the wait; when the deadline passes after one was seen (or one is held), the
   * result is {@link ContextLookup#MISMATCH}, otherwise {@link ContextLookup#MISS}. Cancelling the
   * future withdraws the waiter.
   */
  CompletableFuture<ContextLookup> await(
      List<CorrelationKey> keys, PromptFingerprint fingerprint, Duration timeout);

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
