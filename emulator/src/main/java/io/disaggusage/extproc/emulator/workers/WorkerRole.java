package io.disaggusage.extproc.emulator.workers;

/** A worker's half of prefill/decode disaggregation. */
public enum WorkerRole {
  PREFILL("prefill", "context"),
  DECODE("decode", "generation");

  private final String label;
  private final String trtLlmLabel;

  WorkerRole(String label, String trtLlmLabel) {
    this.label = label;
    this.trtLlmLabel = trtLlmLabel;
  }

  /** The role as {@code engine} names it: TensorRT-LLM says context and generation. */
  public String label(EngineKind engine) {
    return engine == EngineKind.TRTLLM ? trtLlmLabel : label;
  }
}
