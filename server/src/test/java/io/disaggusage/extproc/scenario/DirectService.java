package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.stream.ExtProcService;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.store.MemoryContextUsageStore;
import java.time.Duration;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledThreadPoolExecutor;

/**
 * The service on a memory store behind the {@link DirectEnvoy} driver, with a generous context wait:
 * the fixture of the property tests that run thousands of flows in one process.
 */
final class DirectService implements AutoCloseable {
  final ScheduledThreadPoolExecutor timer;
  final MemoryContextUsageStore store;
  final DirectEnvoy envoy;

  DirectService() {
    timer = (ScheduledThreadPoolExecutor) Executors.newScheduledThreadPool(1);
    timer.setRemoveOnCancelPolicy(true);
    Config config = ServiceUnderTest.testConfig(Duration.ofSeconds(30));
    store = new MemoryContextUsageStore(config.store().ttl(), config.store().maxEntries(), timer);
    envoy = new DirectEnvoy(new ExtProcService(config, store, Metrics.standalone(), timer));
  }

  @Override
  public void close() {
    store.close();
    timer.shutdownNow();
  }
}
