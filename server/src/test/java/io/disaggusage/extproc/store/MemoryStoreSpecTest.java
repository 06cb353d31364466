package io.disaggusage.extproc.store;

import java.time.Duration;

/**
 * The store specification against the in-process store (one replica: its "other replica" is itself),
 * entries aging by the specification's fake clock.
 */
class MemoryStoreSpecTest extends ContextUsageStoreSpec {

  @Override
  protected ContextUsageStore open(Duration ttl) {
    return track(new MemoryContextUsageStore(ttl, 10_000, clock, clock));
  }

  @Override
  protected ContextUsageStore replicaOf(ContextUsageStore store) {
    return store;
  }

  @Override
  protected long sizeNow(ContextUsageStore store) {
    ((MemoryContextUsageStore) store).cleanUp();
    return store.size();
  }
}
