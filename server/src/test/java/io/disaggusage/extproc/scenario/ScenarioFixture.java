package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.config.Config;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;

/**
 * The fixture of the specification's hand-written cases: a fresh service behind a fake Envoy for every
 * test, and the {@link ExchangeInvariants} checked after it on every exchange it ran.
 */
@ExchangeSpecification
abstract class ScenarioFixture {
  ServiceUnderTest service;

  /** The configuration of {@link #service}: the test configuration unless a class needs another. */
  Config config() {
    return ServiceUnderTest.testConfig();
  }

  @BeforeEach
  void start() throws Exception {
    service = new ServiceUnderTest(config());
  }

  @AfterEach
  void stop() throws Exception {
    service.close();
  }
}
