package io.disaggusage.extproc.simulation.workers;

import io.disaggusage.extproc.simulation.engines.WorkerReply;

/** What a worker answers to a {@code POST /v1/chat/completions}. */
interface CompletionHandler {
  WorkerReply complete(RecordedRequest request);
}
