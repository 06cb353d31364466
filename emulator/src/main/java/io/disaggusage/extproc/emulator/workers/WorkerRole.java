package io.disaggusage.extproc.emulator.workers;

import io.disaggusage.extproc.exchange.Phase;
import java.util.Locale;

/** A worker's half of prefill/decode disaggregation. */
public enum WorkerRole {
  PREFILL(Phase.CONTEXT),
  DECODE(Phase.GENERATION);

  /** The leg of a disaggregated request this role serves: TensorRT-LLM names its roles after it. */
  private final Phase phase;

  WorkerRole(Phase phase) {
    this.phase = phase;
  }

  /**
   * The role as {@code engine} names it: {@code prefill} or {@code decode}; TensorRT-LLM says
   * {@code context} or {@code generation}.
   */
  public String label(EngineKind engine) {
    return engine == EngineKind.TRTLLM ? phase.label() : name().toLowerCase(Locale.ROOT);
  }
}
