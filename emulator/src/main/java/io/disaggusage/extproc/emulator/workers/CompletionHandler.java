package io.disaggusage.extproc.emulator.workers;

import io.disaggusage.extproc.emulator.engines.WorkerReply;

/** What a worker answers to a {@code POST /v1/chat/completions} (a {@code /v1/completions} answer is made from it). */
interface CompletionHandler {
  WorkerReply complete(RecordedRequest request);
}
