package io.disaggusage.extproc.emulator.workers;

import io.disaggusage.extproc.emulator.engines.OpenAiWire;
import io.disaggusage.extproc.emulator.engines.UsageVariant;
import java.util.EnumSet;
import java.util.Locale;
import java.util.Set;

/** The engines whose prefill/decode workers are simulated, with what their discovery answers differ in. */
public enum EngineKind {
  TRTLLM("TensorRT-LLM", "tensorrt_llm", "trtllm", EnumSet.of(UsageVariant.BUG, UsageVariant.FIXED)),
  VLLM("vLLM", "vllm", "vllm", EnumSet.allOf(UsageVariant.class)),
  SGLANG("SGLang", "sglang", "sglang", EnumSet.of(UsageVariant.BUG, UsageVariant.FIXED));

  private final String displayName;
  private final String ownedBy;
  private final String metricPrefix;
  private final Set<UsageVariant> variants;

  EngineKind(String displayName, String ownedBy, String metricPrefix, Set<UsageVariant> variants) {
    this.displayName = displayName;
    this.ownedBy = ownedBy;
    this.metricPrefix = metricPrefix;
    this.variants = variants;
  }

  /** The command-line spelling: {@code trtllm}, {@code vllm}, {@code sglang}. */
  public String label() {
    return name().toLowerCase(Locale.ROOT);
  }

  public String displayName() {
    return displayName;
  }

  /** {@code owned_by} of the engine's {@code /v1/models} entries. */
  String ownedBy() {
    return ownedBy;
  }

  /** The namespace of the engine's Prometheus metrics, e.g. {@code vllm:}. */
  String metricPrefix() {
    return metricPrefix;
  }

  /** How the engine's answers are written. */
  OpenAiWire.Style style() {
    return switch (this) {
      case TRTLLM -> OpenAiWire.Style.TRTLLM;
      case VLLM -> OpenAiWire.Style.VLLM;
      case SGLANG -> OpenAiWire.Style.SGLANG;
    };
  }

  /** The usage variants this engine has shipped. */
  public Set<UsageVariant> variants() {
    return variants;
  }

  /** The engine spelled {@code label}. */
  public static EngineKind fromLabel(String label) {
    for (EngineKind kind : values()) {
      if (kind.label().equals(label)) {
        return kind;
      }
    }
    throw new IllegalArgumentException("\"" + label + "\": expected trtllm, vllm or sglang");
  }
}
