package io.disaggusage.extproc.store;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.github.benmanes.caffeine.cache.Ticker;
import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.classify.PromptFingerprint;
import io.disaggusage.extproc.store.ContextWaiters.Waiter;
import io.disaggusage.extproc.usage.ContextUsage;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * In-process store for one replica (sidecar mode): a size- and TTL-bounded Caffeine cache of entries,
 * one cache key per (fingerprint, store key), plus the {@link ContextWaiters} woken directly by {@link #put}.
 * All operations complete immediately except {@link #await}, which completes on a put or on its
 * deadline (scheduled, never blocking a thread).
 *
 * <p>Beside the cache, {@code fingerprintsByKey} lists the fingerprints put under each store key,
 * oldest first: it enforces {@link ContextUsageStore#ENTRIES_PER_KEY} and tells a miss from a
 * fingerprint mismatch. The entry cache stays the truth: a listed fingerprint whose entry has gone
 * (consumed, expired, evicted) is ignored, and dropped at the key's next put. The list itself expires
 * a TTL after that put, when every entry it names has expired too, so a take never has to touch it.
 */
public final class MemoryContextUsageStore implements ContextUsageStore {

  /** One stored context usage and every key it can be found under; consumed at most once. */
  private static final class Entry {
    final ContextUsage usage;
    final String fingerprint;
    final List<String> keys;
    final AtomicBoolean consumed = new AtomicBoolean();

    Entry(ContextUsage usage, String fingerprint, List<String> keys) {
      this.usage = usage;
      this.fingerprint = fingerprint;
      this.keys = keys;
    }
  }

  private final Cache<String, Entry> entries;
  /** Store key → fingerprints put under it, oldest first; immutable lists, replaced on each put. */
  private final Cache<String, List<String>> fingerprintsByKey;
  private final ContextWaiters waiters;

  /**
   * @param ttl how long an unclaimed entry lives
   * @param maxEntries bound on entries; each (store key, fingerprint) counts once, aliases separately
   * @param timer schedules await deadlines
   * @param ticker the clock entries age by
   */
  public MemoryContextUsageStore(
      Duration ttl, long maxEntries, ScheduledExecutorService timer, Ticker ticker) {
    this(ttl, maxEntries, ContextWaiters.Deadlines.on(timer), ticker);
  }

  /** With await deadlines run by {@code deadlines}: a fake clock in tests, together with {@code ticker}. */
  MemoryContextUsageStore(Duration ttl, long maxEntries, ContextWaiters.Deadlines deadlines, Ticker ticker) {
    this.entries = boundedCache(ttl, maxEntries, ticker);
    this.fingerprintsByKey = boundedCache(ttl, maxEntries, ticker);
    this.waiters = new ContextWaiters(deadlines);
  }

  /** Entries live {@code ttl} after their last write; maintenance runs on the calling thread. */
  private static <V> Cache<String, V> boundedCache(Duration ttl, long maxEntries, Ticker ticker) {
    return Caffeine.newBuilder()
        .expireAfterWrite(ttl)
        .maximumSize(maxEntries)
        .ticker(ticker)
        .executor(Runnable::run)
        .build();
  }

  public MemoryContextUsageStore(Duration ttl, long maxEntries, ScheduledExecutorService timer) {
    this(ttl, maxEntries, timer, Ticker.systemTicker());
  }

  @Override
  public CompletableFuture<Void> put(
      List<CorrelationKey> keys, PromptFingerprint fingerprint, ContextUsage usage) {
    List<String> storeKeys = CorrelationKey.storeKeys(keys);
    if (storeKeys.isEmpty()) {
      return CompletableFuture.completedFuture(null);
    }
    String tag = FingerprintTag.of(fingerprint);
    // A waiting generation exchange of this flow gets the usage directly: that is its consumption.
    for (String key : storeKeys) {
      for (Waiter waiter = waiters.firstFor(key, tag); waiter != null; waiter = waiters.firstFor(key, tag)) {
        if (waiter.finish(ContextLookup.found(usage))) {
          return CompletableFuture.completedFuture(null);
        }
      }
    }
    Entry entry = new Entry(usage, tag, storeKeys);
    for (String key : storeKeys) {
      List<String> evicted = new ArrayList<>();
      fingerprintsByKey.asMap().compute(key, (k, held) -> admit(k, held, tag, evicted));
      evicted.forEach(old -> entries.invalidate(cacheKey(old, key)));
      entries.put(cacheKey(tag, key), entry);
    }
    // A waiter may have registered between the poll above and the cache write; hand it the entry.
    // If the entry is gone already, the waiter's own re-check took it (and completes the waiter with
    // it) or another taker did: either way the waiter is left alone, to its re-check or its deadline.
    // Completing it empty here lost the usage of a concurrent flow whose waiter took it meanwhile.
    for (String key : storeKeys) {
      Waiter waiter = waiters.firstFor(key, tag);
      if (waiter != null) {
        if (claim(entry)) {
          if (!waiter.finish(ContextLookup.found(usage))) {
            reinstate(usage, tag, storeKeys); // the waiter's deadline won meanwhile: keep the usage
          }
        }
        break;
      }
    }
    return CompletableFuture.completedFuture(null);
  }

  @Override
  public CompletableFuture<ContextLookup> take(List<CorrelationKey> keys, PromptFingerprint fingerprint) {
    return CompletableFuture.completedFuture(
        takeNow(CorrelationKey.storeKeys(keys), FingerprintTag.of(fingerprint)));
  }

  @Override
  public CompletableFuture<ContextLookup> await(
      List<CorrelationKey> keys, PromptFingerprint fingerprint, Duration timeout) {
    List<String> storeKeys = CorrelationKey.storeKeys(keys);
    String tag = FingerprintTag.of(fingerprint);
    ContextLookup now = takeNow(storeKeys, tag);
    if (now.isFound() || storeKeys.isEmpty()) {
      return CompletableFuture.completedFuture(now);
    }
    Waiter waiter = waiters.register(storeKeys, tag);
    // Re-check: a put may have landed between takeNow and registration.
    ContextLookup raced = takeNow(storeKeys, tag);
    if (raced.isFound()) {
      waiter.finish(raced);
      return waiter.future();
    }
    waiters.expireAfter(
        waiter,
        timeout,
        w -> ContextLookup.notFound(w.sawOtherFingerprint() || holdsOtherFingerprints(storeKeys, tag)));
    return waiter.future();
  }

  @Override
  public long size() {
    entries.cleanUp();
    return entries.asMap().values().stream().distinct().count();
  }

  @Override
  public int waiters() {
    return waiters.size();
  }

  /** Drops every entry (waiters stay): what a restart of a store without persistence looks like. */
  public void clearEntries() {
    entries.invalidateAll();
    fingerprintsByKey.invalidateAll();
  }

  /** Drops expired entries now; Caffeine otherwise does it lazily on access. */
  public void cleanUp() {
    entries.cleanUp();
    fingerprintsByKey.cleanUp();
  }

  @Override
  public void close() {
    waiters.close(ContextLookup.MISS);
    entries.invalidateAll();
    fingerprintsByKey.invalidateAll();
  }

  private ContextLookup takeNow(List<String> storeKeys, String tag) {
    for (String key : storeKeys) {
      Entry entry = entries.getIfPresent(cacheKey(tag, key));
      if (entry != null && claim(entry)) {
        return ContextLookup.found(entry.usage);
      }
    }
    return ContextLookup.notFound(holdsOtherFingerprints(storeKeys, tag));
  }

  private boolean claim(Entry entry) {
    if (!entry.consumed.compareAndSet(false, true)) {
      return false;
    }
    entry.keys.forEach(k -> entries.asMap().remove(cacheKey(entry.fingerprint, k), entry));
    return true;
  }

  /**
   * The fingerprints a key holds after a put with {@code tag}: the live ones, {@code tag} last (newest),
   * and at most {@link #ENTRIES_PER_KEY}; the oldest beyond that go to {@code evicted}.
   */
  private List<String> admit(String key, List<String> held, String tag, List<String> evicted) {
    List<String> kept = new ArrayList<>();
    if (held != null) {
      for (String old : held) {
        if (!old.equals(tag) && entries.asMap().containsKey(cacheKey(old, key))) {
          kept.add(old);
        }
      }
    }
    while (kept.size() >= ENTRIES_PER_KEY) {
      evicted.add(kept.remove(0));
    }
    kept.add(tag);
    return List.copyOf(kept);
  }

  /** Writes a usage taken back from a waiter that completed meanwhile under its keys again. */
  private void reinstate(ContextUsage usage, String tag, List<String> storeKeys) {
    Entry entry = new Entry(usage, tag, storeKeys);
    for (String key : storeKeys) {
      entries.put(cacheKey(tag, key), entry);
    }
  }

  private boolean holdsOtherFingerprints(List<String> storeKeys, String tag) {
    for (String key : storeKeys) {
      List<String> held = fingerprintsByKey.getIfPresent(key);
      if (held == null) {
        continue;
      }
      for (String other : held) {
        if (!other.equals(tag) && entries.getIfPresent(cacheKey(other, key)) != null) {
          return true;
        }
      }
    }
    return false;
  }

  /**
   * The cache key of (fingerprint tag, store key): the tag first, because its form is fixed (32 hex
   * digits or {@code -}, never a colon), so no two pairs give one cache key whatever the store key holds.
   */
  private static String cacheKey(String tag, String storeKey) {
    return tag + ":" + storeKey;
  }
}
