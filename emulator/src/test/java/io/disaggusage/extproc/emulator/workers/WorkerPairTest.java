package io.disaggusage.extproc.emulator.workers;

import io.disaggusage.extproc.emulator.engines.UsageVariant;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;

/** A test of one engine's prefill and decode workers, started per test on free loopback ports. */
abstract class WorkerPairTest {
  private final EngineKind engine;
  private WorkerPair pair;
  EngineWorker prefill;
  EngineWorker decode;

  WorkerPairTest(EngineKind engine) {
    this.engine = engine;
  }

  /** Starts the pair (stopping one a test started before). */
  void start(UsageVariant variant, Duration prefillDelay) throws Exception {
    WorkerPair.stop(pair);
    pair = WorkerPair.start(engine, variant, prefillDelay);
    prefill = pair.prefill();
    decode = pair.decode();
  }

  void start(UsageVariant variant) throws Exception {
    start(variant, Duration.ZERO);
  }

  @AfterEach
  void stopWorkers() {
    WorkerPair.stop(pair);
  }
}
