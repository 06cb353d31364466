package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.store.MemoryContextUsageStore;
import org.junit.jupiter.api.AfterEach;

/** The property tests' fixture: a {@link DirectService} per test method (JUnit makes a new instance for each). */
abstract class DirectServiceFixture {
  final DirectService service = new DirectService();
  final MemoryContextUsageStore store = service.store;
  final DirectEnvoy envoy = service.envoy;

  @AfterEach
  void stop() {
    service.close();
  }
}
