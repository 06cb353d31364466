package io.disaggusage.extproc.store;

import io.disaggusage.extproc.testkit.FreePorts;
import java.time.Duration;

/**
 * The store specification through a Cluster URI of several seed nodes, the first of which is down
 * ({@code redis://127.0.0.1:<nothing>,127.0.0.1:<node>}): the client learns the topology from the seed
 * that answers, as with a Cluster whose first listed node has failed.
 */
class RedisClusterSeedsStoreSpecTest extends RedisStoreSpecTest implements RedisStoreSpecTest.OnCluster {

  @Override
  protected RedisContextUsageStore.Settings settings(Duration ttl) {
    String node = redis.uri().substring("redis://".length());
    String seeds = "redis://127.0.0.1:" + FreePorts.next() + "," + node;
    return new RedisContextUsageStore.Settings(seeds, true, RedisStores.freshPrefix(), ttl, Duration.ofMillis(500));
  }
}
