package io.disaggusage.extproc.emulator.workers;

import io.disaggusage.extproc.emulator.engines.BadRequest;
import io.disaggusage.extproc.emulator.engines.WorkerReply;

/** What a worker answers to a {@code POST /v1/chat/completions} (a {@code /v1/completions} answer is made from it). */
interface CompletionHandler {

  /** The answer to {@code request}; one the worker cannot serve as sent gets its error reply. */
  default WorkerReply complete(RecordedRequest request) {
    try {
      return answer(request);
    } catch (BadRequest e) {
      return e.reply();
    }
  }

  /** The answer to {@code request}, or a {@link BadRequest} when it cannot be served as sent. */
  WorkerReply answer(RecordedRequest request) throws BadRequest;
}
