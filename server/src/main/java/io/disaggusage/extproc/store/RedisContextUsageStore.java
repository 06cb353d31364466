package io.disaggusage.extproc.store;

import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.classify.PromptFingerprint;
import io.disaggusage.extproc.usage.ContextUsage;
import io.lettuce.core.AbstractRedisClient;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisChannelHandler;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisConnectionStateListener;
import io.lettuce.core.RedisNoScriptException;
import io.lettuce.core.RedisURI;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SocketOptions;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.ClusterTopologyRefreshOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.Delay;
import java.net.SocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Context usage shared by every replica through Redis (or Valkey), with the semantics of {@link
 * ContextUsageStore}: a put is one Lua script that writes every alias key (bound to the fingerprint)
 * with the TTL and publishes a wake-up naming the fingerprint, and completes once Redis has acknowledged
 * it; a take is one Lua script that consumes an entry of its fingerprint and all its aliases atomically,
 * so an entry is used at most once across replicas, or reports that only other fingerprints are held; a
 * waiter is woken by a wake-up with its fingerprint on this replica's one pub/sub connection and then
 * takes. Formats: {@link RedisEntryFormat}.
 *
 * <p>Nothing here blocks: every command is asynchronous, fails after {@code store.redis_timeout}, and is
 * rejected at once while the connection is down (so a dead Redis costs an exchange no time at all); the
 * exchange then passes through. Lettuce reconnects by itself; until the first connection is made this
 * store retries in the background. {@link #isReady()} is false while a connection is down or the
 * periodic health check fails.
 */
public final class RedisContextUsageStore implements ContextUsageStore {
  private static final Logger log = LoggerFactory.getLogger(RedisContextUsageStore.class);

  /** How often the entry count is refreshed and the connection checked. */
  static final Duration HEALTH_INTERVAL = Duration.ofSeconds(1);
  /** Consecutive failed health checks after which the store reports not ready. */
  private static final int HEALTH_FAILURES = 2;
  private static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(2);
  private static final Duration RECONNECT_MIN = Duration.ofMillis(50);
  private static final Duration RECONNECT_MAX = Duration.ofSeconds(1);
  private static final int WARM_UP_ATTEMPTS = 50;
  private static final Duration WARM_UP_PAUSE = Duration.ofMillis(20);

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

  /** Thrown (without a stack) into futures while there is no usable connection. */
  static final class UnavailableException extends RuntimeException {
    UnavailableException(String message) {
      super(message, null, false, false);
    }
  }

  /** How to reach Redis and name things there. */
  public record Settings(String uri, boolean cluster, String keyPrefix, Duration ttl, Duration timeout) {}

  /** What the take script answered: the entry taken, or whether other fingerprints' entries are held. */
  private record Taken(Optional<RedisEntryFormat.Entry> entry, boolean otherFingerprints) {
    ContextLookup lookup() {
      return entry.map(e -> ContextLookup.found(e.usage())).orElse(ContextLookup.notFound(otherFingerprints));
    }
  }

  /** A generation exchange waiting on this replica for context usage with its fingerprint under any of its keys. */
  private final class Waiter {
    final List<String> keys;
    final String fingerprint;
    final CompletableFuture<ContextLookup> future = new CompletableFuture<>();
    /** A lookup or a wake-up showed entries of other fingerprints under the keys while this waited. */
    volatile boolean sawOtherFingerprint;

    Waiter(List<String> keys, String fingerprint) {
      this.keys = keys;
      this.fingerprint = fingerprint;
    }

    /** Withdraws, then completes: whoever sees the result sees the waiter gone. */
    boolean finish(ContextLookup result) {
      withdraw();
      return future.complete(result);
    }

    void fail(Throwable error) {
      withdraw();
      future.completeExceptionally(error);
    }

    void withdraw() {
      waiterSet.remove(this);
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

  private final RedisEntryFormat format;
  private final long ttlMillis;
  private final Duration timeout;
  private final ScheduledExecutorService timer;
  private final ClientResources resources;
  private final AbstractRedisClient client;
  private final RedisURI uri;
  private final String target;
  private final String putSha = sha1(PUT_SCRIPT);
  private final String takeSha = sha1(TAKE_SCRIPT);
  private final String countSha = sha1(COUNT_SCRIPT);
  private final ConcurrentHashMap<String, List<Waiter>> waiting = new ConcurrentHashMap<>();
  private final Set<Waiter> waiterSet = ConcurrentHashMap.newKeySet();

  private volatile StatefulConnection<String, String> connection;
  private volatile RedisClusterAsyncCommands<String, String> commands;
  private volatile StatefulRedisPubSubConnection<String, String> pubsub;
  private volatile boolean subscribed;
  private volatile boolean healthy = true;
  private volatile long entries;
  private volatile boolean closed;
  private int healthFailures; // touched by health-check completions only, one at a time
  private volatile Duration connectDelay = RECONNECT_MIN;
  private ScheduledFuture<?> healthTask;

  private RedisContextUsageStore(Settings settings, RedisURI uri, ScheduledExecutorService timer) {
    this.format = new RedisEntryFormat(settings.keyPrefix());
    this.ttlMillis = Math.max(1, settings.ttl().toMillis());
    this.timeout = settings.timeout();
    this.timer = timer;
    this.uri = uri;
    this.target = describe(uri);
    this.resources =
        ClientResources.builder()
            .ioThreadPoolSize(2)
            .computationThreadPoolSize(2)
            .reconnectDelay(Delay.exponential(RECONNECT_MIN, RECONNECT_MAX, 2, TimeUnit.MILLISECONDS))
            .build();
    SocketOptions socket = SocketOptions.builder().connectTimeout(CONNECT_TIMEOUT).keepAlive(true).build();
    TimeoutOptions timeouts = TimeoutOptions.builder().fixedTimeout(timeout).timeoutCommands(true).build();
    if (settings.cluster()) {
      RedisClusterClient cluster = RedisClusterClient.create(resources, uri);
      cluster.setOptions(
          ClusterClientOptions.builder()
              .autoReconnect(true)
              .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
              .timeoutOptions(timeouts)
              .socketOptions(socket)
              .topologyRefreshOptions(
                  ClusterTopologyRefreshOptions.builder().enableAllAdaptiveRefreshTriggers().build())
              .build());
      this.client = cluster;
    } else {
      RedisClient standalone = RedisClient.create(resources, uri);
      standalone.setOptions(
          ClientOptions.builder()
              .autoReconnect(true)
              .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
              .timeoutOptions(timeouts)
              .socketOptions(socket)
              .build());
      this.client = standalone;
    }
  }

  /**
   * Opens the store and starts connecting in the background: an unreachable Redis does not fail this
   * call, the store is just not ready (and every operation fails at once) until it connects.
   *
   * @throws IllegalArgumentException when {@code settings.uri()} is not a Redis URI Lettuce accepts; the
   *     message never contains a password
   */
  public static RedisContextUsageStore open(Settings settings, ScheduledExecutorService timer) {
    RedisURI uri = parseUri(settings.uri());
    uri.setTimeout(CONNECT_TIMEOUT);
    uri.setClientName("disagg-usage-extproc");
    RedisContextUsageStore store = new RedisContextUsageStore(settings, uri, timer);
    store.connect();
    store.healthTask =
        timer.scheduleWithFixedDelay(
            store::checkHealth,
            HEALTH_INTERVAL.toMillis(),
            HEALTH_INTERVAL.toMillis(),
            TimeUnit.MILLISECONDS);
    return store;
  }

  /** Parses a Redis URI as Lettuce does; the error names what is wrong without repeating a password. */
  public static RedisURI parseUri(String text) {
    try {
      RedisURI uri = RedisURI.create(text.trim());
      boolean sentinel = uri.getSentinels() != null && !uri.getSentinels().isEmpty();
      if (!sentinel && (uri.getHost() == null || uri.getHost().isEmpty())) {
        throw new IllegalArgumentException("no host");
      }
      return uri;
    } catch (RuntimeException e) {
      String reason =
          e instanceof NumberFormatException
              ? "the database (path) must be a number"
              : e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
      throw new IllegalArgumentException(
          "invalid Redis URI " + redact(text) + ": " + redact(reason), e);
    }
  }

  // -------------------------------------------------------------------------------------------
  // Connection

  private void connect() {
    if (closed) {
      return;
    }
    // The pub/sub connection second: a cluster client learns the topology on its first connection.
    CompletableFuture<StatefulConnection<String, String>> main = connectMain();
    CompletableFuture<StatefulRedisPubSubConnection<String, String>> sub =
        main.thenCompose(m -> connectPubSub());
    sub.thenCompose(s -> attach(main.join(), s))
        .whenComplete(
            (ok, error) -> {
              if (error == null) {
                return;
              }
              main.thenAccept(StatefulConnection::closeAsync);
              sub.thenAccept(StatefulConnection::closeAsync);
              if (closed) {
                return;
              }
              Duration delay = connectDelay;
              connectDelay = min(connectDelay.multipliedBy(2), RECONNECT_MAX);
              log.warn(
                  "Redis store: cannot connect to {} ({}); retrying in {} ms, traffic passes through meanwhile",
                  target,
                  reason(error),
                  delay.toMillis());
              timer.schedule(this::connect, delay.toMillis(), TimeUnit.MILLISECONDS);
            });
  }

  private CompletableFuture<StatefulConnection<String, String>> connectMain() {
    try {
      if (client instanceof RedisClusterClient cluster) {
        // Lettuce's asynchronous cluster connect needs the topology loaded first.
        return cluster
            .refreshPartitionsAsync()
            .toCompletableFuture()
            .thenCompose(loaded -> cluster.connectAsync(StringCodec.UTF8))
            .thenApply(c -> c);
      }
      return ((RedisClient) client).connectAsync(StringCodec.UTF8, uri).toCompletableFuture().thenApply(c -> c);
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(e);
    }
  }

  private CompletableFuture<StatefulRedisPubSubConnection<String, String>> connectPubSub() {
    try {
      if (client instanceof RedisClusterClient cluster) {
        return cluster.connectPubSubAsync(StringCodec.UTF8).thenApply(c -> c);
      }
      return ((RedisClient) client).connectPubSubAsync(StringCodec.UTF8, uri).toCompletableFuture();
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(e);
    }
  }

  @SuppressWarnings("unchecked")
  private CompletionStage<Void> attach(
      StatefulConnection<String, String> main, StatefulRedisPubSubConnection<String, String> sub) {
    if (closed) {
      main.closeAsync();
      sub.closeAsync();
      return CompletableFuture.completedFuture(null);
    }
    RedisClusterAsyncCommands<String, String> async =
        main instanceof io.lettuce.core.cluster.api.StatefulRedisClusterConnection<?, ?> c
            ? ((io.lettuce.core.cluster.api.StatefulRedisClusterConnection<String, String>) c).async()
            : ((io.lettuce.core.api.StatefulRedisConnection<String, String>) main).async();
    sub.addListener(
        new RedisPubSubAdapter<>() {
          @Override
          public void message(String channel, String message) {
            onWakeUp(message);
          }

          @Override
          public void subscribed(String channel, long count) {
            // (Re)subscribed, e.g. after a reconnect: wake-ups may have been missed meanwhile.
            subscribed = true;
            sweep();
          }
        });
    sub.addListener(
        new RedisConnectionStateListener() {
          @Override
          public void onRedisDisconnected(RedisChannelHandler<?, ?> handler) {
            subscribed = false;
          }

          @Override
          public void onRedisConnected(RedisChannelHandler<?, ?> handler, SocketAddress address) {}
        });
    return sub.async()
        .subscribe(format.channel())
        .toCompletableFuture()
        .thenCompose(subscribedOk -> warmUp(async, WARM_UP_ATTEMPTS))
        .thenAccept(
            count -> {
              this.commands = async;
              this.connection = main;
              this.pubsub = sub;
              this.subscribed = true;
              this.entries = count;
              this.healthy = true;
              connectDelay = RECONNECT_MIN;
              log.info("Redis store: connected to {}", target);
              if (closed) {
                closeConnections();
              }
            });
  }

  /**
   * The first command through a new connection, retried briefly: a cluster client opens the connection
   * to the node serving this store's slot on first use and rejects commands until it is up.
   */
  private CompletableFuture<Long> warmUp(RedisClusterAsyncCommands<String, String> async, int attempts) {
    return this.<Long>script(async, countSha, COUNT_SCRIPT, ScriptOutputType.INTEGER, List.of(format.indexKey()))
        .handle(
            (count, error) -> {
              if (error == null) {
                return CompletableFuture.completedFuture(count);
              }
              if (attempts <= 1 || closed) {
                return CompletableFuture.<Long>failedFuture(unwrap(error));
              }
              CompletableFuture<Long> retry = new CompletableFuture<>();
              timer.schedule(
                  () -> {
                    warmUp(async, attempts - 1)
                        .whenComplete((c, e) -> {
                          if (e == null) {
                            retry.complete(c);
                          } else {
                            retry.completeExceptionally(e);
                          }
                        });
                  },
                  WARM_UP_PAUSE.toMillis(),
                  TimeUnit.MILLISECONDS);
              return retry;
            })
        .thenCompose(f -> f);
  }

  private void checkHealth() {
    if (closed || commands == null) {
      return;
    }
    refreshCount();
  }

  private void refreshCount() {
    countEntries()
        .whenComplete(
            (count, error) -> {
              synchronized (this) {
                if (error == null) {
                  entries = count;
                  healthFailures = 0;
                  if (!healthy) {
                    log.info("Redis store: {} answers again", target);
                  }
                  healthy = true;
                } else if (++healthFailures >= HEALTH_FAILURES && healthy) {
                  healthy = false;
                  log.warn("Redis store: {} does not answer ({}); not ready", target, reason(error));
                }
              }
            });
  }

  // -------------------------------------------------------------------------------------------
  // ContextUsageStore

  @Override
  public CompletableFuture<Void> put(
      List<CorrelationKey> keys, PromptFingerprint fingerprint, ContextUsage usage) {
    List<String> storeKeys = storeKeys(keys);
    if (storeKeys.isEmpty()) {
      return CompletableFuture.completedFuture(null);
    }
    String tag = FingerprintTag.of(fingerprint);
    // A generation exchange of this flow waiting on this replica gets the usage directly: that is its consumption.
    if (deliverLocally(storeKeys, tag, usage)) {
      return CompletableFuture.completedFuture(null);
    }
    return write(UUID.randomUUID().toString(), tag, storeKeys, usage);
  }

  private CompletableFuture<Void> write(String id, String tag, List<String> storeKeys, ContextUsage usage) {
    List<String> redisKeys = new ArrayList<>(2 * storeKeys.size() + 1);
    redisKeys.add(format.indexKey());
    for (String key : storeKeys) {
      redisKeys.add(format.key(tag, key));
      redisKeys.add(format.fingerprintsKey(key));
    }
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
    return script(putSha, PUT_SCRIPT, ScriptOutputType.INTEGER, redisKeys, args.toArray(String[]::new))
        .thenApply(ok -> null);
  }

  @Override
  public CompletableFuture<ContextLookup> take(List<CorrelationKey> keys, PromptFingerprint fingerprint) {
    return takeEntry(storeKeys(keys), FingerprintTag.of(fingerprint)).thenApply(Taken::lookup);
  }

  private CompletableFuture<Taken> takeEntry(List<String> storeKeys, String tag) {
    if (storeKeys.isEmpty()) {
      return CompletableFuture.completedFuture(new Taken(Optional.empty(), false));
    }
    List<String> redisKeys = new ArrayList<>(2 * storeKeys.size() + 1);
    redisKeys.add(format.indexKey());
    for (String key : storeKeys) {
      redisKeys.add(format.key(tag, key));
      redisKeys.add(format.fingerprintsKey(key));
    }
    CompletableFuture<List<Object>> reply =
        script(
            takeSha,
            TAKE_SCRIPT,
            ScriptOutputType.MULTI,
            redisKeys,
            format.keyPrefix(),
            format.fingerprintsPrefix(),
            tag);
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
    List<String> storeKeys = storeKeys(keys);
    if (storeKeys.isEmpty()) {
      return CompletableFuture.completedFuture(ContextLookup.MISS);
    }
    if (!subscribed || commands == null || closed) {
      return CompletableFuture.failedFuture(unavailable());
    }
    Waiter waiter = new Waiter(storeKeys, FingerprintTag.of(fingerprint));
    waiterSet.add(waiter);
    for (String key : storeKeys) {
      waiting.compute(
          key,
          (k, list) -> {
            List<Waiter> l = list == null ? new CopyOnWriteArrayList<>() : list;
            l.add(waiter);
            return l;
          });
    }
    ScheduledFuture<?> deadline =
        timer.schedule(
            () -> waiter.finish(ContextLookup.notFound(waiter.sawOtherFingerprint)),
            timeout.toNanos(),
            TimeUnit.NANOSECONDS);
    waiter.future.whenComplete(
        (r, e) -> {
          deadline.cancel(false);
          waiter.withdraw();
        });
    // Registered and subscribed: a put from now on wakes this waiter; one that landed before is taken here.
    attempt(waiter);
    return waiter.future;
  }

  /** Tries to take an entry for {@code waiter}; leaves it waiting when there is none yet. */
  private void attempt(Waiter waiter) {
    if (waiter.future.isDone()) {
      return;
    }
    takeEntry(waiter.keys, waiter.fingerprint)
        .whenComplete(
            (taken, error) -> {
              if (error != null) {
                waiter.fail(unwrap(error));
                return;
              }
              if (taken.otherFingerprints()) {
                waiter.sawOtherFingerprint = true;
              }
              Optional<RedisEntryFormat.Entry> found = taken.entry();
              if (found.isPresent() && !waiter.finish(ContextLookup.found(found.get().usage()))) {
                handOver(found.get());
              }
            });
  }

  /** An entry taken for a waiter that went away meanwhile: to another waiter here, or back to Redis. */
  private void handOver(RedisEntryFormat.Entry entry) {
    if (deliverLocally(entry.keys(), entry.fingerprint(), entry.usage())) {
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

  private boolean deliverLocally(List<String> storeKeys, String tag, ContextUsage usage) {
    for (String key : storeKeys) {
      List<Waiter> list = waiting.get(key);
      if (list != null) {
        for (Waiter waiter : list) {
          if (waiter.fingerprint.equals(tag) && waiter.finish(ContextLookup.found(usage))) {
            return true;
          }
        }
      }
    }
    return false;
  }

  /**
   * A put landed on some replica: its flow's waiters here take it; the other waiters under those keys
   * only learn that their key is shared (what their deadline reports if their own entry never comes).
   */
  private void onWakeUp(String message) {
    RedisEntryFormat.WakeUp wakeUp = RedisEntryFormat.readWakeUp(message);
    Set<Waiter> woken = new LinkedHashSet<>();
    for (String key : wakeUp.keys()) {
      List<Waiter> list = waiting.get(key);
      if (list != null) {
        for (Waiter waiter : list) {
          if (waiter.fingerprint.equals(wakeUp.fingerprint())) {
            woken.add(waiter);
          } else {
            waiter.sawOtherFingerprint = true;
          }
        }
      }
    }
    woken.forEach(this::attempt);
  }

  /** After a (re)subscription: every waiter looks once, in case its wake-up was missed. */
  private void sweep() {
    waiterSet.forEach(this::attempt);
  }

  /** Entries held in Redis for this key prefix, as of the last health check (every second). */
  @Override
  public long size() {
    return entries;
  }

  /** Counts the entries held in Redis now (all replicas' writes; expired ones dropped first). */
  public CompletableFuture<Long> countEntries() {
    return script(countSha, COUNT_SCRIPT, ScriptOutputType.INTEGER, List.of(format.indexKey()));
  }

  @Override
  public int waiters() {
    return waiterSet.size();
  }

  @Override
  public boolean isReady() {
    StatefulConnection<String, String> c = connection;
    StatefulRedisPubSubConnection<String, String> s = pubsub;
    return !closed && c != null && s != null && c.isOpen() && s.isOpen() && subscribed && healthy;
  }

  /** The names this store uses in Redis. */
  public RedisEntryFormat format() {
    return format;
  }

  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    if (healthTask != null) {
      healthTask.cancel(false);
    }
    List.copyOf(waiterSet).forEach(w -> w.finish(ContextLookup.MISS));
    // Shutting the client down closes its connections.
    try {
      client.shutdownAsync(0, 2, TimeUnit.SECONDS).get(3, TimeUnit.SECONDS);
      resources.shutdown(0, 2, TimeUnit.SECONDS).get(3, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (Exception e) {
      log.warn("Redis store: shutdown incomplete: {}", reason(e));
    }
  }

  private void closeConnections() {
    StatefulConnection<String, String> c = connection;
    StatefulRedisPubSubConnection<String, String> s = pubsub;
    if (c != null) {
      c.closeAsync();
    }
    if (s != null) {
      s.closeAsync();
    }
  }

  // -------------------------------------------------------------------------------------------
  // Commands

  /** Runs a script by its SHA-1, loading it on the first NOSCRIPT; fails at once without a connection. */
  private <T> CompletableFuture<T> script(
      String sha, String source, ScriptOutputType type, List<String> keys, String... args) {
    RedisClusterAsyncCommands<String, String> async = commands;
    if (async == null || closed) {
      return CompletableFuture.failedFuture(unavailable());
    }
    return script(async, sha, source, type, keys, args);
  }

  private <T> CompletableFuture<T> script(
      RedisClusterAsyncCommands<String, String> async,
      String sha,
      String source,
      ScriptOutputType type,
      List<String> keys,
      String... args) {
    String[] keyArray = keys.toArray(String[]::new);
    try {
      CompletableFuture<T> bySha =
          async.<T>evalsha(sha, type, keyArray, args).toCompletableFuture();
      return bySha.handle(
              (result, error) -> {
                if (error == null) {
                  return CompletableFuture.completedFuture(result);
                }
                if (unwrap(error) instanceof RedisNoScriptException) {
                  return async.<T>eval(source, type, keyArray, args).toCompletableFuture();
                }
                return CompletableFuture.<T>failedFuture(unwrap(error));
              })
          .thenCompose(f -> f);
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(e);
    }
  }

  private UnavailableException unavailable() {
    return new UnavailableException(
        closed ? "Redis store closed" : "Redis store not connected to " + target);
  }

  private static Throwable unwrap(Throwable t) {
    return t instanceof CompletionException && t.getCause() != null ? t.getCause() : t;
  }

  /** The failure and its root cause, for logs; URIs in messages lose their credentials. */
  private static String reason(Throwable t) {
    Throwable e = unwrap(t);
    Throwable root = e;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    String text = describe(e);
    return root == e ? text : text + " (cause: " + describe(root) + ")";
  }

  private static String describe(Throwable e) {
    String message = e.getMessage();
    return e.getClass().getSimpleName() + (message == null ? "" : ": " + redact(message));
  }

  private static List<String> storeKeys(List<CorrelationKey> keys) {
    return keys.stream().map(CorrelationKey::storeKey).distinct().toList();
  }

  private static Duration min(Duration a, Duration b) {
    return a.compareTo(b) <= 0 ? a : b;
  }

  /** {@code host:port} (or the Sentinel master id) for logs: never credentials. */
  private static String describe(RedisURI uri) {
    if (uri.getSentinels() != null && !uri.getSentinels().isEmpty()) {
      return "sentinel master " + uri.getSentinelMasterId();
    }
    return uri.getHost() + ":" + uri.getPort();
  }

  /** Removes the user-info part of anything that looks like a URI. */
  static String redact(String text) {
    return text.replaceAll("(?i)([a-z][a-z0-9+.-]*://)[^@/\\s]*@", "$1***@");
  }

  private static String sha1(String script) {
    try {
      byte[] digest = MessageDigest.getInstance("SHA-1").digest(script.getBytes(StandardCharsets.UTF_8));
      return HexFormat.of().formatHex(digest).toLowerCase(Locale.ROOT);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
