package io.disaggusage.extproc.store;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.github.benmanes.caffeine.cache.Ticker;
import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.usage.ContextUsage;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * In-process store for one replica (sidecar mode): a size- and TTL-bounded Caffeine cache of entries,
 * plus a table of waiters woken directly by {@link #put}. All operations complete immediately except
 * {@link #await}, which completes on a put or on its deadline (scheduled, never blocking a thread).
 */
public final class MemoryContextUsageStore implements ContextUsageStore {

  /** One stored context usage and every key it can be found under; consumed at most once. */
  private static final class Entry {
    final ContextUsage usage;
    final List<String> keys;
    final AtomicBoolean consumed = new AtomicBoolean();

    Entry(ContextUsage usage, List<String> keys) {
      this.usage = usage;
      this.keys = keys;
    }
  }

  /** A generation exchange waiting for context usage under any of its keys. */
  private final class Waiter {
    final List<String> keys;
    final CompletableFuture<Optional<ContextUsage>> future = new CompletableFuture<>();

    Waiter(List<String> keys) {
      this.keys = keys;
    }

    boolean deliver(ContextUsage usage) {
      return future.complete(Optional.of(usage));
    }

    void withdraw() {
      for (String key : keys) {
        waiting.computeIfPresent(
            key,
            (k, list) -> {
              list.remove(this);
              return list.isEmpty() ? null : list;
            });
      }
    }
  }

  private final Cache<String, Entry> entries;
  private final ConcurrentHashMap<String, List<Waiter>> waiting = new ConcurrentHashMap<>();
  private final ScheduledExecutorService timer;

  /**
   * @param ttl how long an unclaimed entry lives
   * @param maxEntries bound on entries (aliases counted separately by the cache, so the bound is on keys)
   * @param timer schedules await deadlines
   */
  public MemoryContextUsageStore(
      Duration ttl, long maxEntries, ScheduledExecutorService timer, Ticker ticker) {
    this.entries =
        Caffeine.newBuilder()
            .expireAfterWrite(ttl)
            .maximumSize(maxEntries)
            .ticker(ticker)
            .executor(Runnable::run)
            .build();
    this.timer = timer;
  }

  public MemoryContextUsageStore(Duration ttl, long maxEntries, ScheduledExecutorService timer) {
    this(ttl, maxEntries, timer, Ticker.systemTicker());
  }

  @Override
  public CompletableFuture<Void> put(List<CorrelationKey> keys, ContextUsage usage) {
    List<String> storeKeys = storeKeys(keys);
    if (storeKeys.isEmpty()) {
      return CompletableFuture.completedFuture(null);
    }
    // A waiting generation exchange gets the usage directly: that is its consumption.
    for (String key : storeKeys) {
      Waiter waiter = pollWaiter(key);
      while (waiter != null) {
        waiter.withdraw();
        if (waiter.deliver(usage)) {
          return CompletableFuture.completedFuture(null);
        }
        waiter = pollWaiter(key);
      }
    }
    Entry entry = restore(usage, storeKeys);
    // A waiter may have registered between the poll above and the cache write; hand it the entry.
    // If the entry is gone already, the waiter's own re-check took it (and completes the waiter with
    // it) or another taker did: either way the waiter is left alone, to its re-check or its deadline.
    // Completing it empty here lost the usage of a concurrent flow whose waiter took it meanwhile.
    for (String key : storeKeys) {
      Waiter waiter = pollWaiter(key);
      if (waiter != null) {
        Optional<ContextUsage> claimed = claim(entry);
        if (claimed.isPresent()) {
          waiter.withdraw();
          if (!waiter.deliver(claimed.get())) {
            restore(claimed.get(), storeKeys); // the waiter's deadline won meanwhile: keep the usage
          }
        }
        break;
      }
    }
    return CompletableFuture.completedFuture(null);
  }

  @Override
  public CompletableFuture<Optional<ContextUsage>> take(List<CorrelationKey> keys) {
    return CompletableFuture.completedFuture(takeNow(storeKeys(keys)));
  }

  @Override
  public CompletableFuture<Optional<ContextUsage>> await(List<CorrelationKey> keys, Duration timeout) {
    List<String> storeKeys = storeKeys(keys);
    Optional<ContextUsage> now = takeNow(storeKeys);
    if (now.isPresent() || storeKeys.isEmpty()) {
      return CompletableFuture.completedFuture(now);
    }
    Waiter waiter = new Waiter(storeKeys);
    for (String key : storeKeys) {
      waiting.compute(
          key,
          (k, list) -> {
            List<Waiter> l = list == null ? new CopyOnWriteArrayList<>() : list;
            l.add(waiter);
            return l;
          });
    }
    // Re-check: a put may have landed between takeNow and registration.
    Optional<ContextUsage> raced = takeNow(storeKeys);
    if (raced.isPresent()) {
      waiter.withdraw();
      waiter.future.complete(raced);
      return waiter.future;
    }
    // Withdrawn before completing: whoever sees the empty result sees no waiter left.
    var deadline =
        timer.schedule(
            () -> {
              waiter.withdraw(); // before completing: whoever sees the result sees no waiter left
              waiter.future.complete(Optional.empty());
            },
            timeout.toNanos(),
            TimeUnit.NANOSECONDS);
    waiter.future.whenComplete(
        (r, e) -> {
          deadline.cancel(false);
          waiter.withdraw();
        });
    return waiter.future;
  }

  @Override
  public long size() {
    entries.cleanUp();
    return entries.asMap().values().stream().distinct().count();
  }

  @Override
  public int waiters() {
    return waiting.values().stream().mapToInt(List::size).sum();
  }

  /** Drops every entry (waiters stay): what a restart of a store without persistence looks like. */
  public void clearEntries() {
    entries.invalidateAll();
  }

  /** Drops expired entries now; Caffeine otherwise does it lazily on access. */
  public void cleanUp() {
    entries.cleanUp();
  }

  @Override
  public void close() {
    waiting.values().forEach(list -> List.copyOf(list).forEach(w -> w.future.complete(Optional.empty())));
    waiting.clear();
    entries.invalidateAll();
  }

  private Optional<ContextUsage> takeNow(List<String> storeKeys) {
    for (String key : storeKeys) {
      Entry entry = entries.getIfPresent(key);
      if (entry != null) {
        Optional<ContextUsage> claimed = claim(entry);
        if (claimed.isPresent()) {
          return claimed;
        }
      }
    }
    return Optional.empty();
  }

  /** Writes the usage under every key as one entry (consumed once, whichever key takes it). */
  private Entry restore(ContextUsage usage, List<String> storeKeys) {
    Entry entry = new Entry(usage, storeKeys);
    for (String key : storeKeys) {
      entries.put(key, entry);
    }
    return entry;
  }

  private Optional<ContextUsage> claim(Entry entry) {
    if (!entry.consumed.compareAndSet(false, true)) {
      return Optional.empty();
    }
    entry.keys.forEach(k -> entries.asMap().remove(k, entry));
    return Optional.of(entry.usage);
  }

  private Waiter pollWaiter(String key) {
    List<Waiter> list = waiting.get(key);
    if (list == null) {
      return null;
    }
    for (Waiter waiter : list) {
      return waiter;
    }
    return null;
  }

  private static List<String> storeKeys(List<CorrelationKey> keys) {
    return keys.stream().map(CorrelationKey::storeKey).distinct().toList();
  }
}
