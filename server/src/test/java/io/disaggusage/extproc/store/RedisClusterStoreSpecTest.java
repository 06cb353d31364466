package io.disaggusage.extproc.store;

import java.time.Duration;

/**
 * The store specification against a (one-node) Redis Cluster through Lettuce's cluster client
 * ({@code store.redis_cluster: true}): the scripts run under cluster routing, so every key of an entry
 * must hash to one slot.
 */
class RedisClusterStoreSpecTest extends RedisStoreSpecTest implements RedisStoreSpecTest.OnCluster {

  @Override
  protected RedisContextUsageStore.Settings settings(Duration ttl) {
    return new RedisContextUsageStore.Settings(
        redis.uri(), true, RedisStores.freshPrefix(), ttl, Duration.ofMillis(500));
  }
}
