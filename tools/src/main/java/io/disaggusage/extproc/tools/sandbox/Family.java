package io.disaggusage.extproc.tools.sandbox;

import io.disaggusage.extproc.emulator.engines.DisaggEngine;
import io.disaggusage.extproc.emulator.workers.EngineKind;

/**
 * A simulated engine family in the sandbox: its workers, its orchestrator's flow and the names of its
 * Envoy clusters.
 *
 * @param key lower-case name used in Envoy names, e.g. {@code trtllm}
 * @param index position in the sandbox, for its ports
 */
record Family(String key, int index, DisaggEngine engine) {
  /** The port layout has room for two families. */
  static final int MAX = 2;

  Family {
    if (index < 0 || index >= MAX) {
      throw new IllegalArgumentException("family index " + index + ": the sandbox has room for " + MAX);
    }
  }

  /** The engine whose workers the family runs. */
  EngineKind kind() {
    return EngineKind.fromLabel(key);
  }

  /** The Envoy cluster of this family's {@code leg} workers, e.g. {@code trtllm_context}. */
  String cluster(Leg leg) {
    return key + "_" + leg.shippedCluster();
  }
}
