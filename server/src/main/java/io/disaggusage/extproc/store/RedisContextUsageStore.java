package io.disaggusage.extproc.store;

import static io.disaggusage.extproc.store.RedisConnection.reason;
import static io.disaggusage.extproc.store.RedisConnection.unwrap;

import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.classify.PromptFingerprint;
import io.disaggusage.extproc.store.ContextWaiters.Waiter;
import io.disaggusage.extproc.usage.ContextUsage;
import io.lettuce.core.ScriptOutputType;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledExecutorService;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Context usage shared by every replica through Redis (or Valkey), with the semantics of {@link
 * ContextUsageStore}: a put is one Lua script that writes every alias key (bound to the fingerprint)
 * with the TTL and publishes a wake-up naming the fingerprint, and completes once Redis has acknowledged
 * it; a take is one Lua script that consumes an entry of its fingerprint and all its aliases atomically,
 * so an entry is used at most once across replicas, or reports that only other fingerprints are held; a
 * waiter is woken by a wake-up with its fingerprint on this replica's one pub/sub connection and then
 * takes. Formats: {@link RedisEntryFormat}; the connection, its reconnects and its health:
 * {@link RedisConnection}.
 *
 * <p>Nothing here blocks: every command is asynchronous, fails after {@code store.redis_timeout}, and is
 * rejected at once while the connection is down (so a dead Redis costs an exchange no time at all); the
 * exchange then passes through. {@link #isReady()} is false while a connection is down or the periodic
 * health check fails.
 */
public final class RedisContextUsageStore implements ContextUsageStore {
  private static final Logger log = LoggerFactory.getLogger(RedisContextUsageStore.class);

  /**
   * KEYS: index, then per store key its entry key and its fingerprints key. ARGV: value, ttl ms, entry
   * id, channel, wake-up message, fingerprint, entries per key, entry key prefix, then the store keys.
   * A key already holding the per-key cap of other fingerprints loses its oldest ones first.
   */
  static final String PUT_SCRIPT =
      """
      local t = redis.call('TIME')
      local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      local ttl = tonumber(ARGV[2])
      local fp = ARGV[6]
      local cap = tonumber(ARGV[7])
      local n = 0
      for i = 2, #KEYS, 2 do
        n = n + 1
        local storeKey = ARGV[8 + n]
        local fps = KEYS[i + 1]
        redis.call('ZREMRANGEBYSCORE', fps, '-inf', now)
        redis.call('ZREM', fps, fp)
        local over = redis.call('ZCARD', fps) - cap + 1
        if over > 0 then
          for _, old in ipairs(redis.call('ZRANGE', fps, 0, over - 1)) do
            redis.call('DEL', ARGV[8] .. old .. ':' .. storeKey)
          end
          redis.call('ZREMRANGEBYRANK', fps, 0, over - 1)
        end
        redis.call('SET', KEYS[i], ARGV[1], 'PX', ttl)
        redis.call('ZADD', fps, now + ttl, fp)
        redis.call('PEXPIRE', fps, ttl)
      end
      redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
      redis.call('ZADD', KEYS[1], now + ttl, ARGV[3])
      redis.call('PEXPIRE', KEYS[1], ttl)
      redis.call('PUBLISH', ARGV[4], ARGV[5])
      return 1
      """;

  /**
   * KEYS: index, then per store key (in lookup order) its entry key for the fingerprint and its
   * fingerprints key. ARGV: entry key prefix, fingerprints key prefix, fingerprint. Returns {1, value}
   * for the first value found, after deleting it under every alias that still holds this very value;
   * otherwise {2} when a key holds live entries of other fingerprints, {0} when it holds none.
   */
  static final String TAKE_SCRIPT =
      """
      local fp = ARGV[3]
      for i = 2, #KEYS, 2 do
        local value = redis.call('GET', KEYS[i])
        if value then
          redis.call('DEL', KEYS[i])
          redis.call('ZREM', KEYS[i + 1], fp)
          local ok, entry = pcall(cjson.decode, value)
          if ok and type(entry) == 'table' then
            if type(entry.keys) == 'table' then
              for _, alias in ipairs(entry.keys) do
                local key = ARGV[1] .. fp .. ':' .. tostring(alias)
                if key ~= KEYS[i] and redis.call('GET', key) == value then
                  redis.call('DEL', key)
                  redis.call('ZREM', ARGV[2] .. tostring(alias), fp)
                end
              end
            end
            if type(entry.id) == 'string' then
              redis.call('ZREM', KEYS[1], entry.id)
            end
          end
          return {1, value}
        end
      end
      local t = redis.call('TIME')
      local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      for i = 3, #KEYS, 2 do
        local live = redis.call('ZCOUNT', KEYS[i], '(' .. now, '+inf')
        local own = redis.call('ZSCORE', KEYS[i], fp)
        if own and tonumber(own) > now then
          live = live - 1
        end
        if live > 0 then
          return {2}
        end
      end
      return {0}
      """;

  /** KEYS: index. Drops expired ids and returns how many entries are held. */
  static final String COUNT_SCRIPT =
      """
      local t = redis.call('TIME')
      local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
      return redis.call('ZCARD', KEYS[1])
      """;

  private static final RedisConnection.Script PUT = RedisConnection.Script.of(PUT_SCRIPT, ScriptOutputType.INTEGER);
  private static final RedisConnection.Script TAKE = RedisConnection.Script.of(TAKE_SCRIPT, ScriptOutputType.MULTI);
  private static final RedisConnection.Script COUNT = RedisConnection.Script.of(COUNT_SCRIPT, ScriptOutputType.INTEGER);

  /** How to reach Redis and name things there. */
  public record Settings(String uri, boolean cluster, String keyPrefix, Duration ttl, Duration timeout) {}

  /** What the take script answered: the entry taken, or whether other fingerprints' entries are held. */
  private record Taken(Optional<RedisEntryFormat.Entry> entry, boolean otherFingerprints) {
    ContextLookup lookup() {
      return entry.map(e -> ContextLookup.found(e.usage())).orElse(ContextLookup.notFound(otherFingerprints));
    }
  }

  private final RedisEntryFormat format;
  private final long ttlMillis;
  private final ContextWaiters waiters;
  private final RedisConnection connection;
  /** Entries held in Redis, as the connection's last probe (the count script) answered. */
  private volatile long entries;

  private RedisContextUsageStore(
      Settings settings, ScheduledExecutorService timer, ContextWaiters.Deadlines deadlines) {
    this.format = new RedisEntryFormat(settings.keyPrefix());
    this.ttlMillis = Math.max(1, settings.ttl().toMillis());
    this.waiters = new ContextWaiters(deadlines);
    this.connection =
        new RedisConnection(
            settings.uri(),
            settings.cluster(),
            settings.timeout(),
            format.channel(),
            COUNT,
            List.of(format.indexKey()),
            List.of(PUT, TAKE, COUNT),
            new RedisConnection.Listener() {
              @Override
              public void onMessage(String message) {
                onWakeUp(message);
              }

              @Override
              public void onSubscribed() {
                sweep();
              }

              @Override
              public void onProbe(long answer) {
                entries = answer;
              }
            },
            timer);
  }

  /**
   * Opens the store and starts connecting in the background: an unreachable Redis does not fail this
   * call, the store is just not ready (and every operation fails at once) until it connects.
   *
   * @param timer runs reconnects, the health check and await deadlines
   * @throws IllegalArgumentException when {@code settings.uri()} is not a Redis URI Lettuce accepts; the
   *     message never contains a password
   */
  public static RedisContextUsageStore open(Settings settings, ScheduledExecutorService timer) {
    return open(settings, timer, ContextWaiters.Deadlines.on(timer));
  }

  /** Like {@link #open(Settings, ScheduledExecutorService)}, with await deadlines run by {@code deadlines}. */
  static RedisContextUsageStore open(
      Settings settings, ScheduledExecutorService timer, ContextWaiters.Deadlines deadlines) {
    RedisContextUsageStore store = new RedisContextUsageStore(settings, timer, deadlines);
    store.connection.start();
    return store;
  }

  // -------------------------------------------------------------------------------------------
  // ContextUsageStore

  @Override
  public CompletableFuture<Void> put(
      List<CorrelationKey> keys, PromptFingerprint fingerprint, ContextUsage usage) {
    List<String> storeKeys = CorrelationKey.storeKeys(keys);
    if (storeKeys.isEmpty()) {
      return CompletableFuture.completedFuture(null);
    }
    String tag = FingerprintTag.of(fingerprint);
    // A generation exchange of this flow waiting on this replica gets the usage directly: that is its consumption.
    if (waiters.deliver(storeKeys, tag, usage)) {
      return CompletableFuture.completedFuture(null);
    }
    return write(UUID.randomUUID().toString(), tag, storeKeys, usage);
  }

  private CompletableFuture<Void> write(String id, String tag, List<String> storeKeys, ContextUsage usage) {
    List<String> args = new ArrayList<>(8 + storeKeys.size());
    args.add(RedisEntryFormat.encode(id, tag, storeKeys, usage));
    args.add(Long.toString(ttlMillis));
    args.add(id);
    args.add(format.channel());
    args.add(RedisEntryFormat.wakeUp(tag, storeKeys));
    args.add(tag);
    args.add(Integer.toString(ENTRIES_PER_KEY));
    args.add(format.keyPrefix());
    args.addAll(storeKeys);
    return connection.run(PUT, redisKeys(tag, storeKeys), args.toArray(String[]::new)).thenApply(ok -> null);
  }

  /** The scripts' KEYS: the index, then per store key its entry key for {@code tag} and its fingerprints key. */
  private List<String> redisKeys(String tag, List<String> storeKeys) {
    List<String> redisKeys = new ArrayList<>(2 * storeKeys.size() + 1);
    redisKeys.add(format.indexKey());
    for (String key : storeKeys) {
      redisKeys.add(format.key(tag, key));
      redisKeys.add(format.fingerprintsKey(key));
    }
    return redisKeys;
  }

  @Override
  public CompletableFuture<ContextLookup> take(List<CorrelationKey> keys, PromptFingerprint fingerprint) {
    return takeEntry(CorrelationKey.storeKeys(keys), FingerprintTag.of(fingerprint)).thenApply(Taken::lookup);
  }

  private CompletableFuture<Taken> takeEntry(List<String> storeKeys, String tag) {
    if (storeKeys.isEmpty()) {
      return CompletableFuture.completedFuture(new Taken(Optional.empty(), false));
    }
    CompletableFuture<List<Object>> reply =
        connection.run(TAKE, redisKeys(tag, storeKeys), format.keyPrefix(), format.fingerprintsPrefix(), tag);
    return reply.thenApply(RedisContextUsageStore::taken);
  }

  /** Reads the take script's answer: {1, value}, {2} (other fingerprints held) or {0}. */
  private static Taken taken(List<Object> reply) {
    long status = (Long) reply.get(0);
    if (status == 1) {
      return new Taken(Optional.of(RedisEntryFormat.decode((String) reply.get(1))), false);
    }
    return new Taken(Optional.empty(), status == 2);
  }

  @Override
  public CompletableFuture<ContextLookup> await(
      List<CorrelationKey> keys, PromptFingerprint fingerprint, Duration timeout) {
    List<String> storeKeys = CorrelationKey.storeKeys(keys);
    if (storeKeys.isEmpty()) {
      return CompletableFuture.completedFuture(ContextLookup.MISS);
    }
    if (!connection.isListening()) {
      return CompletableFuture.failedFuture(connection.unavailable());
    }
    Waiter waiter = waiters.register(storeKeys, FingerprintTag.of(fingerprint));
    waiters.expireAfter(waiter, timeout, w -> ContextLookup.notFound(w.sawOtherFingerprint()));
    // Registered and subscribed: a put from now on wakes this waiter; one that landed before is taken here.
    attempt(waiter);
    return waiter.future();
  }

  /** Tries to take an entry for {@code waiter}; leaves it waiting when there is none yet. */
  private void attempt(Waiter waiter) {
    if (waiter.isDone()) {
      return;
    }
    takeEntry(waiter.keys(), waiter.fingerprint())
        .whenComplete(
            (taken, error) -> {
              if (error != null) {
                waiter.fail(unwrap(error));
                return;
              }
              if (taken.otherFingerprints()) {
                waiter.markOtherFingerprint();
              }
              Optional<RedisEntryFormat.Entry> found = taken.entry();
              if (found.isPresent() && !waiter.finish(ContextLookup.found(found.get().usage()))) {
                handOver(found.get());
              }
            });
  }

  /** An entry taken for a waiter that went away meanwhile: to another waiter here, or back to Redis. */
  private void handOver(RedisEntryFormat.Entry entry) {
    if (waiters.deliver(entry.keys(), entry.fingerprint(), entry.usage())) {
      return;
    }
    write(entry.id(), entry.fingerprint(), entry.keys(), entry.usage())
        .whenComplete(
            (ok, error) -> {
              if (error != null) {
                log.warn("Redis store: could not put back an entry after its waiter left: {}", reason(error));
              }
            });
  }

  /**
   * A put landed on some replica: its flow's waiters here take it; the other waiters under those keys
   * only learn that their key is shared (what their deadline reports if their own entry never comes).
   */
  private void onWakeUp(String message) {
    RedisEntryFormat.WakeUp wakeUp = RedisEntryFormat.readWakeUp(message);
    waiters.wake(wakeUp.keys(), wakeUp.fingerprint()).forEach(this::attempt);
  }

  /** After a (re)subscription: every waiter looks once, in case its wake-up was missed. */
  private void sweep() {
    waiters.forEach(this::attempt);
  }

  /** Entries held in Redis for this key prefix, as of the last health check (every second). */
  @Override
  public long size() {
    return entries;
  }

  /** Counts the entries held in Redis now (all replicas' writes; expired ones dropped first). */
  public CompletableFuture<Long> countEntries() {
    return connection.run(COUNT, List.of(format.indexKey()));
  }

  @Override
  public int waiters() {
    return waiters.size();
  }

  @Override
  public boolean isReady() {
    return connection.isReady();
  }

  /** The names this store uses in Redis. */
  public RedisEntryFormat format() {
    return format;
  }

  @Override
  public void close() {
    if (!connection.markClosed()) {
      return;
    }
    waiters.close(ContextLookup.MISS);
    connection.close(); // shutting the client down closes its connections
  }
}
