package io.disaggusage.extproc.emulator.workers;

import io.disaggusage.extproc.emulator.engines.UsageVariant;
import java.time.Duration;
import java.util.Objects;

/**
 * One worker to start.
 *
 * @param host the bind address; also the host a SGLang prefill's bootstrap listener binds
 * @param port 0 for any free port
 * @param bootstrapPort a SGLang prefill's bootstrap listener (0 for any free port); ignored otherwise
 * @param model the model id {@code /v1/models} and the SGLang info endpoints report
 * @param prefillDelay how long a prefill worker waits before it answers (its KV is ready before)
 * @param tokenDelay a pause per streamed event (per token), and per output token before a JSON answer
 */
public record WorkerSpec(
    EngineKind engine, WorkerRole role, String host, int port, int bootstrapPort, UsageVariant variant, String model,
    Duration prefillDelay, Duration tokenDelay) {
  /** The model id when none is given. */
  public static final String DEFAULT_MODEL = "simulated-model";

  public WorkerSpec {
    Objects.requireNonNull(engine, "engine");
    Objects.requireNonNull(role, "role");
    Objects.requireNonNull(host, "host");
    Objects.requireNonNull(variant, "variant");
    Objects.requireNonNull(model, "model");
    if (port < 0 || port > 65_535 || bootstrapPort < 0 || bootstrapPort > 65_535) {
      throw new IllegalArgumentException("ports are 0 (any free one) to 65535");
    }
    if (!engine.variants().contains(variant)) {
      throw new IllegalArgumentException(engine.displayName() + " has no " + variant.label() + " variant");
    }
    if (prefillDelay.isNegative() || tokenDelay.isNegative()) {
      throw new IllegalArgumentException("delays cannot be negative");
    }
  }

  /** A worker of {@code engine} in {@code role} on {@code host:port}: the bug variant, no delays. */
  public static WorkerSpec of(EngineKind engine, WorkerRole role, String host, int port) {
    return new WorkerSpec(engine, role, host, port, 0, UsageVariant.BUG, DEFAULT_MODEL, Duration.ZERO, Duration.ZERO);
  }

  public WorkerSpec withVariant(UsageVariant v) {
    return new WorkerSpec(engine, role, host, port, bootstrapPort, v, model, prefillDelay, tokenDelay);
  }

  public WorkerSpec withBootstrapPort(int p) {
    return new WorkerSpec(engine, role, host, port, p, variant, model, prefillDelay, tokenDelay);
  }

  public WorkerSpec withModel(String m) {
    return new WorkerSpec(engine, role, host, port, bootstrapPort, variant, m, prefillDelay, tokenDelay);
  }

  public WorkerSpec withPrefillDelay(Duration d) {
    return new WorkerSpec(engine, role, host, port, bootstrapPort, variant, model, d, tokenDelay);
  }

  public WorkerSpec withTokenDelay(Duration d) {
    return new WorkerSpec(engine, role, host, port, bootstrapPort, variant, model, prefillDelay, d);
  }

  /** E.g. {@code SGLang prefill worker}. */
  public String description() {
    return engine.displayName() + " " + role.label(engine) + " worker";
  }
}
