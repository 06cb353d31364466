package io.disaggusage.extproc.simulation.workers;

import io.disaggusage.extproc.runtime.StartupException;
import io.disaggusage.extproc.simulation.engines.UsageVariant;
import java.time.Duration;

/** A prefill and a decode worker of one engine on free loopback ports, stopped together. */
record WorkerPair(EngineWorker prefill, EngineWorker decode) implements AutoCloseable {

  static WorkerPair start(EngineKind engine, UsageVariant variant, Duration prefillDelay) throws StartupException {
    EngineWorker prefill =
        EngineWorker.start(
            WorkerSpec.of(engine, WorkerRole.PREFILL, "127.0.0.1", 0).withVariant(variant).withPrefillDelay(prefillDelay));
    try {
      return new WorkerPair(prefill, EngineWorker.start(WorkerSpec.of(engine, WorkerRole.DECODE, "127.0.0.1", 0).withVariant(variant)));
    } catch (StartupException | RuntimeException e) {
      prefill.close();
      throw e;
    }
  }

  /** Stops both; safe on a pair that was never started. */
  static void stop(WorkerPair pair) {
    if (pair != null) {
      pair.close();
    }
  }

  @Override
  public void close() {
    prefill.close();
    decode.close();
  }
}
