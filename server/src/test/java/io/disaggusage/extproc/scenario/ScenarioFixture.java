package io.disaggusage.extproc.scenario;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;

/** A fresh service behind a fake Envoy for every test, with the test configuration. */
abstract class ScenarioFixture {
  ServiceUnderTest service;

  @BeforeEach
  void start() throws Exception {
    service = new ServiceUnderTest(ServiceUnderTest.testConfig());
  }

  @AfterEach
  void stop() throws Exception {
    service.close();
  }
}
