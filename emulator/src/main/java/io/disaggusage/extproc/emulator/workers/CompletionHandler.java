package io.disaggusage.extproc.emulator.workers;

import io.disaggusage.extproc.emulator.engines.WorkerReply;

/** What a worker answers to a {@code POST /v1/chat/completions}. */
interface CompletionHandler {
  WorkerReply complete(RecordedRequest request);
}
