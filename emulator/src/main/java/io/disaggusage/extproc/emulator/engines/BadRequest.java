package io.disaggusage.extproc.emulator.engines;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.emulator.engines.WorkerReply.TokenCounts;

/**
 * A refusal of a request that cannot be read, by a worker or an orchestrator: HTTP 400 with an OpenAI
 * error object, as the engines answer.
 */
public final class BadRequest extends Exception {
  public BadRequest(String message) {
    super(message);
  }

  /** The 400 response. */
  public WorkerReply reply() {
    return errorReply(400, "BadRequestError", getMessage());
  }

  /** An engine's OpenAI error object answer, e.g. a 500 {@code InternalServerError}. */
  public static WorkerReply errorReply(int status, String type, String message) {
    ObjectNode error = OpenAiWire.JSON.createObjectNode();
    error.put("object", "error").put("message", message).put("type", type).putNull("param");
    error.put("code", status);
    return new WorkerReply(status, OpenAiWire.JSON_TYPE, OpenAiWire.bytes(error), new TokenCounts(0, 0, 0));
  }
}
