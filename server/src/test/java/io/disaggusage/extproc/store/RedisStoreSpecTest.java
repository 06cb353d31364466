package io.disaggusage.extproc.store;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInfo;

/**
 * The store specification against the Redis store on a real redis-server: "another replica" is a second
 * store object on the same Redis, exactly as two service replicas are.
 */
class RedisStoreSpecTest extends ContextUsageStoreSpec {
  static RedisServer redis;

  private final Map<ContextUsageStore, RedisContextUsageStore.Settings> settings = new HashMap<>();

  /** Marks a subclass that runs the specification on a Redis Cluster instead. */
  interface OnCluster {}

  @BeforeAll
  static void startRedis(TestInfo info) throws Exception {
    boolean cluster = OnCluster.class.isAssignableFrom(info.getTestClass().orElseThrow());
    redis = cluster ? RedisServer.startCluster() : RedisServer.start();
  }

  @AfterAll
  static void stopRedis() throws Exception {
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
    RedisContextUsageStore store = track(RedisStores.openReady(s, timer));
    settings.put(store, s);
    return store;
  }

  @Override
  protected ContextUsageStore replicaOf(ContextUsageStore store) {
    RedisContextUsageStore.Settings s = settings.get(store);
    RedisContextUsageStore replica = track(RedisStores.openReady(s, timer));
    settings.put(replica, s);
    return replica;
  }

  @Override
  protected long sizeNow(ContextUsageStore store) {
    return ((RedisContextUsageStore) store).countEntries().join();
  }
}
