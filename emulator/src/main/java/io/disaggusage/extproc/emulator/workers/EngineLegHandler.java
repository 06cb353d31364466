package io.disaggusage.extproc.emulator.workers;

import io.disaggusage.extproc.emulator.engines.BadRequest;
import io.disaggusage.extproc.emulator.engines.DisaggEngine;
import io.disaggusage.extproc.emulator.engines.WorkerCall;
import io.disaggusage.extproc.emulator.engines.WorkerReply;

/**
 * A TensorRT-LLM or vLLM worker's completions: the context or generation leg of the simulated engine
 * ({@link io.disaggusage.extproc.emulator.engines.TrtLlmEngine},
 * {@link io.disaggusage.extproc.emulator.engines.VllmEngine}), which hold the engine's wire format.
 * A TensorRT-LLM worker also reads the MessagePack bodies its orchestrator sends since PR #16873.
 */
final class EngineLegHandler implements CompletionHandler {
  private final DisaggEngine engine;
  private final WorkerRole role;
  private final boolean readsMsgpack;

  EngineLegHandler(DisaggEngine engine, WorkerRole role, boolean readsMsgpack) {
    this.engine = engine;
    this.role = role;
    this.readsMsgpack = readsMsgpack;
  }

  @Override
  public WorkerReply answer(RecordedRequest request) throws BadRequest {
    byte[] body = request.body();
    if (readsMsgpack && MsgpackRequestBody.marks(request)) {
      body = MsgpackRequestBody.toJson(body);
    }
    WorkerCall call = new WorkerCall(request.path(), request.firstHeaderValues(), body);
    return role == WorkerRole.PREFILL ? engine.context(call) : engine.generation(call);
  }
}
