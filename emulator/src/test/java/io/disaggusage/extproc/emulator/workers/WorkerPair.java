package io.disaggusage.extproc.emulator.workers;

import io.disaggusage.extproc.emulator.engines.UsageVariant;
import java.time.Duration;

/** A prefill and a decode worker of one engine on free loopback ports, stopped together. */
record WorkerPair(EngineWorker prefill, EngineWorker decode) implements AutoCloseable {

  static WorkerPair start(EngineKind engine, UsageVariant variant, Duration prefillDelay) throws WorkerStartException {
    EngineWorker prefill =
        EngineWorker.start(
            WorkerSpec.of(engine, WorkerRole.PREFILL, "127.0.0.1", 0).withVariant(variant).withPrefillDelay(prefillDelay));
    try {
      return new WorkerPair(prefill, EngineWorker.start(WorkerSpec.of(engine, WorkerRole.DECODE, "127.0.0.1", 0).withVariant(variant)));
    } catch (WorkerStartException | RuntimeException e) {
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
