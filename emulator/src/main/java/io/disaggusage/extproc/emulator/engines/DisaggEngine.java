package io.disaggusage.extproc.emulator.engines;

import java.util.List;

/**
 * A simulated disaggregated deployment of one engine family: its orchestrator (which builds the two
 * worker calls of a client request), its context worker (a real prefix cache over the prompt's token
 * blocks, truthful usage) and its generation worker (which, like the engines that shipped the bug,
 * reports the KV it received from the context worker as cached). Calls and replies are the bytes these
 * engines put on the wire.
 */
public interface DisaggEngine {

  /** The engine family, e.g. {@code TensorRT-LLM}. */
  String name();

  /** The orders this family's orchestrators use. */
  List<ScheduleOrder> orders();

  /** The orchestrator's call to a context worker for {@code request}. */
  WorkerCall contextCall(ClientRequest request, ScheduleOrder order);

  /** The context worker's answer: a prefill of the prompt through its prefix cache. */
  WorkerReply context(WorkerCall call);

  /**
   * The orchestrator's call to a generation worker. Context-first orchestrators build it from the
   * context reply; generation-first ones only from the context call (the reply is not there yet).
   */
  WorkerCall generationCall(ClientRequest request, ScheduleOrder order, WorkerCall contextCall, WorkerReply contextReply);

  /** The generation worker's answer, JSON or a server-sent event stream as the request asks. */
  WorkerReply generation(WorkerCall call);
}
