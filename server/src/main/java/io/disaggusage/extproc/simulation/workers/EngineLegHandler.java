package io.disaggusage.extproc.simulation.workers;

import io.disaggusage.extproc.simulation.engines.DisaggEngine;
import io.disaggusage.extproc.simulation.engines.WorkerCall;
import io.disaggusage.extproc.simulation.engines.WorkerReply;

/**
 * A TensorRT-LLM or vLLM worker's completions: the context or generation leg of the simulated engine
 * ({@link io.disaggusage.extproc.simulation.engines.TrtLlmEngine},
 * {@link io.disaggusage.extproc.simulation.engines.VllmEngine}), which hold the engine's wire format.
 */
final class EngineLegHandler implements CompletionHandler {
  private final DisaggEngine engine;
  private final WorkerRole role;

  EngineLegHandler(DisaggEngine engine, WorkerRole role) {
    this.engine = engine;
    this.role = role;
  }

  @Override
  public WorkerReply complete(RecordedRequest request) {
    WorkerCall call = new WorkerCall(request.path(), request.firstHeaderValues(), request.body());
    return role == WorkerRole.PREFILL ? engine.context(call) : engine.generation(call);
  }
}
