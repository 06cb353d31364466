package io.disaggusage.extproc.store;

import io.disaggusage.extproc.logtext.LogText;
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
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.ClusterTopologyRefreshOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.SlotHash;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
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
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One replica's link to Redis (or Valkey) for {@link RedisContextUsageStore}: the Lettuce client and its
 * resources, one command connection, one pub/sub connection subscribed to the store's channel, and a
 * periodic probe that tells whether Redis answers. It knows nothing of entries: the store hands it the
 * channel, the probe script and a {@link Listener}, and runs its scripts through {@link #run}.
 *
 * <p>Nothing here blocks but {@link #close()}: every command is asynchronous, fails after the command
 * timeout, and is rejected at once while the connection is down. Lettuce reconnects a connection it once
 * made by itself; until the first connection is made this class retries in the background, backing off
 * from {@code RECONNECT_MIN} to {@code RECONNECT_MAX}. {@link #isReady()} is false while a connection is
 * down or the probe has failed {@code HEALTH_FAILURES} times in a row.
 */
final class RedisConnection implements AutoCloseable {
  /** The store's logger: its lines keep the name operators filter on. */
  private static final Logger log = LoggerFactory.getLogger(RedisContextUsageStore.class);

  /** How often the probe runs. */
  static final Duration HEALTH_INTERVAL = Duration.ofSeconds(1);
  /** Consecutive failed probes after which the connection reports not ready. */
  private static final int HEALTH_FAILURES = 2;
  private static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(2);
  private static final Duration RECONNECT_MIN = Duration.ofMillis(50);
  private static final Duration RECONNECT_MAX = Duration.ofSeconds(1);
  /**
   * The longest pause between Lettuce's attempts to restore a lost connection. Short, because a failover
   * is seen at an attempt: a Sentinel-managed connection asks the sentinels for the master on each one.
   * (First connections back off to {@link #RECONNECT_MAX}, each attempt logged.)
   */
  private static final Duration RESTORE_MAX = Duration.ofMillis(250);
  private static final int WARM_UP_ATTEMPTS = 50;
  /**
   * How often a Cluster client reloads the topology whether or not anything failed: a failover is seen
   * within this period of completing, even while every command to the dead master fails at once.
   */
  static final Duration TOPOLOGY_REFRESH = Duration.ofMillis(500);
  /**
   * The least time between two topology reloads an event triggers (a redirection, a node that keeps
   * failing to reconnect). Lettuce's default, 30 s, would let the reload a failure triggers just before
   * the failover completes block the one after it.
   */
  private static final Duration TRIGGERED_REFRESH_SPACING = Duration.ofMillis(100);
  /**
   * How long a Cluster topology query waits for one node. A frozen node accepts connections but never
   * answers; a longer wait would hold up every reload, and with it the view of a failover, for as long.
   */
  static final Duration TOPOLOGY_QUERY_TIMEOUT = Duration.ofMillis(250);
  private static final Duration WARM_UP_PAUSE = Duration.ofMillis(20);

  /** A Lua script, run by its SHA-1 and sent whole only when Redis does not know it yet. */
  record Script(String source, ScriptOutputType output, String sha) {
    static Script of(String source, ScriptOutputType output) {
      return new Script(source, output, sha1(source));
    }
  }

  /** What the store hears from the connection. Called on Lettuce's threads; must not block. */
  interface Listener {
    /** A message on the channel. */
    void onMessage(String message);

    /** The channel is (re)subscribed, e.g. after a reconnect: messages may have been missed meanwhile. */
    void onSubscribed();

    /** The probe answered {@code answer}: once at connect, then every {@link #HEALTH_INTERVAL}. */
    void onProbe(long answer);
  }

  /** Thrown (without a stack) into futures while there is no usable connection. */
  static final class UnavailableException extends RuntimeException {
    UnavailableException(String message) {
      super(message, null, false, false);
    }
  }

  private final ScheduledExecutorService timer;
  private final ClientResources resources;
  private final AbstractRedisClient client;
  private final RedisURI uri;
  private final String target;
  private final String channel;
  private final Script probe;
  private final List<String> probeKeys;
  private final List<Script> scripts;
  private final Listener listener;
  private final RedisNodeEvents nodeEvents;

  private volatile StatefulConnection<String, String> connection;
  private volatile RedisClusterAsyncCommands<String, String> commands;
  private volatile StatefulRedisPubSubConnection<String, String> pubsub;
  private volatile boolean subscribed;
  private volatile boolean healthy = true;
  private volatile boolean closed;
  private int healthFailures; // touched by probe completions only, one at a time
  private volatile Duration connectDelay = RECONNECT_MIN;
  private volatile ScheduledFuture<?> healthTask;
  private final AtomicLong lastTopologyReload = new AtomicLong(System.nanoTime());
  private final AtomicBoolean reloading = new AtomicBoolean();

  /**
   * A connection not started yet ({@link #start()}).
   *
   * @param uri {@code store.redis_uri} ({@link RedisUris}: one node, a Sentinel set, or Cluster seeds)
   * @param cluster whether to use Lettuce's cluster client
   * @param timeout the budget of every command
   * @param channel the pub/sub channel whose messages go to {@code listener}
   * @param probe the first command through a new connection and the periodic health probe
   * @param probeKeys its keys
   * @param scripts every script the store runs, loaded into Redis on each new connection so the first
   *     exchanges after a start or a failover need no second round trip (a NOSCRIPT is still handled)
   * @param timer runs reconnect attempts and the probe
   * @throws IllegalArgumentException when {@code uri} is not a Redis URI Lettuce accepts; the message
   *     never contains a password
   */
  RedisConnection(
      String uri,
      boolean cluster,
      Duration timeout,
      String channel,
      Script probe,
      List<String> probeKeys,
      List<Script> scripts,
      Listener listener,
      ScheduledExecutorService timer) {
    List<RedisURI> nodes = RedisUris.parse(uri, cluster);
    for (RedisURI node : nodes) {
      // Commands have their own budget (TimeoutOptions below); this one bounds topology queries and handshakes.
      node.setTimeout(cluster ? TOPOLOGY_QUERY_TIMEOUT : CONNECT_TIMEOUT);
      node.setClientName("disagg-usage-extproc");
    }
    this.uri = nodes.get(0);
    this.timer = timer;
    this.target = RedisUris.describe(nodes);
    this.channel = channel;
    this.probe = probe;
    this.probeKeys = probeKeys;
    this.scripts = List.copyOf(scripts);
    this.listener = listener;
    this.resources =
        ClientResources.builder()
            .ioThreadPoolSize(2)
            .computationThreadPoolSize(2)
            .reconnectDelay(Delay.exponential(RECONNECT_MIN, RESTORE_MAX, 2, TimeUnit.MILLISECONDS))
            .build();
    // Every key of the store shares one hash tag, so the probe's key names the slot that matters.
    this.nodeEvents =
        new RedisNodeEvents(resources.eventBus(), nodes, cluster ? SlotHash.getSlot(probeKeys.get(0)) : null);
    if (cluster) {
      RedisClusterClient clusterClient = RedisClusterClient.create(resources, nodes); // every seed
      clusterClient.setOptions(
          commonOptions(ClusterClientOptions.builder(), timeout)
              .topologyRefreshOptions(
                  ClusterTopologyRefreshOptions.builder()
                      .enablePeriodicRefresh(TOPOLOGY_REFRESH)
                      .enableAllAdaptiveRefreshTriggers()
                      .adaptiveRefreshTriggersTimeout(TRIGGERED_REFRESH_SPACING)
                      .refreshTriggersReconnectAttempts(1)
                      .build())
              .build());
      this.client = clusterClient;
    } else {
      RedisClient standalone = RedisClient.create(resources, this.uri);
      standalone.setOptions(commonOptions(ClientOptions.builder(), timeout).build());
      this.client = standalone;
    }
  }

  /**
   * Reconnect by itself, reject commands at once while disconnected, time every command out after
   * {@code timeout}, and keep sockets alive: the options of both clients.
   */
  private static <B extends ClientOptions.Builder> B commonOptions(B builder, Duration timeout) {
    builder
        .autoReconnect(true)
        .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
        .timeoutOptions(TimeoutOptions.builder().fixedTimeout(timeout).timeoutCommands(true).build())
        .socketOptions(SocketOptions.builder().connectTimeout(CONNECT_TIMEOUT).keepAlive(true).build());
    return builder;
  }

  /**
   * Starts connecting in the background and probing every {@link #HEALTH_INTERVAL}: an unreachable Redis
   * does not fail this call, the connection is just not ready (and every command fails at once) until it
   * connects.
   */
  void start() {
    connect();
    healthTask =
        timer.scheduleWithFixedDelay(
            this::checkHealth, HEALTH_INTERVAL.toMillis(), HEALTH_INTERVAL.toMillis(), TimeUnit.MILLISECONDS);
  }

  // -------------------------------------------------------------------------------------------
  // Connecting

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
        main instanceof StatefulRedisClusterConnection<?, ?> c
            ? ((StatefulRedisClusterConnection<String, String>) c).async()
            : ((StatefulRedisConnection<String, String>) main).async();
    sub.addListener(
        new RedisPubSubAdapter<>() {
          @Override
          public void message(String from, String message) {
            listener.onMessage(message);
          }

          @Override
          public void subscribed(String to, long count) {
            // (Re)subscribed, e.g. after a reconnect: messages may have been missed meanwhile.
            subscribed = true;
            listener.onSubscribed();
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
        .subscribe(channel)
        .toCompletableFuture()
        .thenCompose(subscribedOk -> loadScripts(async))
        .thenCompose(loaded -> warmUp(async, WARM_UP_ATTEMPTS))
        .thenAccept(
            answer -> {
              this.commands = async;
              this.connection = main;
              this.pubsub = sub;
              this.subscribed = true;
              listener.onProbe(answer);
              this.healthy = true;
              connectDelay = RECONNECT_MIN;
              log.info("Redis store: connected to {}", target);
              if (closed) {
                closeConnections();
              }
            });
  }

  /**
   * Loads every script (a Cluster client loads them on every master). Never fails: a script not loaded
   * now is sent whole on its first NOSCRIPT, as after a Redis restart.
   */
  private CompletableFuture<Void> loadScripts(RedisClusterAsyncCommands<String, String> async) {
    CompletableFuture<?>[] loads = new CompletableFuture<?>[scripts.size()];
    for (int i = 0; i < loads.length; i++) {
      CompletableFuture<String> load;
      try {
        load = async.scriptLoad(scripts.get(i).source()).toCompletableFuture();
      } catch (RuntimeException e) {
        load = CompletableFuture.failedFuture(e);
      }
      loads[i] = load.exceptionally(error -> null);
    }
    return CompletableFuture.allOf(loads);
  }

  /**
   * The first command through a new connection, retried briefly: a cluster client opens the connection
   * to the node serving this store's slot on first use and rejects commands until it is up.
   */
  private CompletableFuture<Long> warmUp(RedisClusterAsyncCommands<String, String> async, int attempts) {
    return this.<Long>run(async, probe, probeKeys)
        .handle(
            (answer, error) -> {
              if (error == null) {
                return CompletableFuture.completedFuture(answer);
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
    this.<Long>run(probe, probeKeys)
        .whenComplete(
            (answer, error) -> {
              synchronized (this) {
                if (error == null) {
                  listener.onProbe(answer);
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
  // State

  /** True while connected, subscribed and answering the probe. */
  boolean isReady() {
    StatefulConnection<String, String> c = connection;
    StatefulRedisPubSubConnection<String, String> s = pubsub;
    return !closed && c != null && s != null && c.isOpen() && s.isOpen() && subscribed && healthy;
  }

  /** True while a message published from now on reaches the listener and commands can be sent. */
  boolean isListening() {
    return subscribed && commands != null && !closed;
  }

  /** The failure for an operation that finds no usable connection. */
  UnavailableException unavailable() {
    return new UnavailableException(
        closed ? "Redis store closed" : "Redis store not connected to " + target);
  }

  /**
   * Marks the connection closed, so every command from now on fails at once and no reconnect starts; the
   * client keeps running until {@link #close()}. False when it was closed already.
   */
  synchronized boolean markClosed() {
    if (closed) {
      return false;
    }
    closed = true;
    if (healthTask != null) {
      healthTask.cancel(false);
    }
    return true;
  }

  /** Shuts the client down, which closes its connections; waits up to a few seconds for that. */
  @Override
  public void close() {
    markClosed();
    nodeEvents.close();
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

  /** Runs {@code script} by its SHA-1, loading it on the first NOSCRIPT; fails at once without a connection. */
  <T> CompletableFuture<T> run(Script script, List<String> keys, String... args) {
    RedisClusterAsyncCommands<String, String> async = commands;
    if (async == null || closed) {
      return CompletableFuture.failedFuture(unavailable());
    }
    return run(async, script, keys, args);
  }

  private <T> CompletableFuture<T> run(
      RedisClusterAsyncCommands<String, String> async, Script script, List<String> keys, String... args) {
    String[] keyArray = keys.toArray(String[]::new);
    try {
      CompletableFuture<T> bySha =
          async.<T>evalsha(script.sha(), script.output(), keyArray, args).toCompletableFuture();
      return bySha.handle(
              (result, error) -> {
                if (error == null) {
                  return CompletableFuture.completedFuture(result);
                }
                if (unwrap(error) instanceof RedisNoScriptException) {
                  return async.<T>eval(script.source(), script.output(), keyArray, args).toCompletableFuture();
                }
                reloadTopologySoon();
                return CompletableFuture.<T>failedFuture(unwrap(error));
              })
          .thenCompose(f -> f);
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(e);
    }
  }

  /**
   * After a failed command, a Cluster client reloads the topology at once (at most every
   * {@link #TRIGGERED_REFRESH_SPACING}, one reload at a time): a master that stopped answering without
   * dropping its connections (frozen, partitioned) triggers none of Lettuce's own reloads, and the
   * periodic one may be waiting out such a node.
   */
  private void reloadTopologySoon() {
    if (!(client instanceof RedisClusterClient cluster) || closed) {
      return;
    }
    long now = System.nanoTime();
    if (now - lastTopologyReload.get() < TRIGGERED_REFRESH_SPACING.toNanos() || !reloading.compareAndSet(false, true)) {
      return;
    }
    lastTopologyReload.set(now);
    try {
      cluster.refreshPartitionsAsync().whenComplete((ok, error) -> reloading.set(false));
    } catch (RuntimeException e) {
      reloading.set(false);
    }
  }

  // -------------------------------------------------------------------------------------------
  // Failures, for futures and logs

  static Throwable unwrap(Throwable t) {
    return t instanceof CompletionException && t.getCause() != null ? t.getCause() : t;
  }

  /** The failure and its root cause, for logs; URIs in messages lose their credentials. */
  static String reason(Throwable t) {
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
    return e.getClass().getSimpleName() + (message == null ? "" : ": " + LogText.withoutCredentials(message));
  }

  private static Duration min(Duration a, Duration b) {
    return a.compareTo(b) <= 0 ? a : b;
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
