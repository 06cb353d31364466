package io.disaggusage.extproc.store;

import static org.assertj.core.api.Assertions.assertThat;

import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInfo;

/**
 * The store specification against the Redis store on a real redis-server: "another replica" is a second
 * store object on the same Redis, exactly as two service replicas are. Await deadlines run on the
 * specification's fake clock; entries expire by Redis's own clock.
 */
class RedisStoreSpecTest extends ContextUsageStoreSpec {
  static RedisServer redis;
  /** A connection of the test's own, to wait on Redis's clock. */
  private static RedisClient clockClient;
  private static StatefulRedisConnection<String, String> redisClock;

  private final Map<ContextUsageStore, RedisContextUsageStore.Settings> settings = new HashMap<>();

  /** Marks a subclass that runs the specification on a Redis Cluster instead. */
  interface OnCluster {}

  @BeforeAll
  static void startRedis(TestInfo info) throws Exception {
    boolean cluster = OnCluster.class.isAssignableFrom(info.getTestClass().orElseThrow());
    redis = cluster ? RedisServer.startCluster() : RedisServer.start();
    clockClient = RedisClient.create(redis.uri());
    redisClock = clockClient.connect();
  }

  @AfterAll
  static void stopRedis() throws Exception {
    if (clockClient != null) {
      clockClient.shutdown();
    }
    if (redis != null) {
      redis.close();
    }
  }

  protected RedisContextUsageStore.Settings settings(Duration ttl) {
    return new RedisContextUsageStore.Settings(
        redis.uri(), false, RedisStores.freshPrefix(), ttl, Duration.ofMillis(500));
  }

  @Override
  protected ContextUsageStore open(Duration ttl) {
    RedisContextUsageStore.Settings s = settings(ttl);
    RedisContextUsageStore store = track(RedisStores.openReady(s, timer, clock));
    settings.put(store, s);
    return store;
  }

  @Override
  protected ContextUsageStore replicaOf(ContextUsageStore store) {
    RedisContextUsageStore.Settings s = settings.get(store);
    RedisContextUsageStore replica = track(RedisStores.openReady(s, timer, clock));
    settings.put(replica, s);
    return replica;
  }

  /**
   * Redis expires entries by its own clock, which no test can move: besides the fake clock, this blocks
   * on the server for {@code elapsed}, a BLPOP on a key nobody writes, which times out by that clock.
   */
  @Override
  protected void elapse(Duration elapsed) {
    super.elapse(elapsed);
    assertThat(redisClock.sync().blpop(elapsed.toNanos() / 1e9, "spec:clock:never-written")).isNull();
  }

  @Override
  protected long sizeNow(ContextUsageStore store) {
    return ((RedisContextUsageStore) store).countEntries().join();
  }
}
