package io.disaggusage.extproc.store;

import java.time.Duration;

/** The store specification against the in-process store (one replica: its "other replica" is itself). */
class MemoryStoreSpecTest extends ContextUsageStoreSpec {

  @Override
  protected ContextUsageStore open(Duration ttl) {
    return track(new MemoryContextUsageStore(ttl, 10_000, timer));
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
