package io.disaggusage.extproc.exchange;

import io.disaggusage.extproc.usage.UsageNames;

/** Chooses the body processor for a response: leg (context/generation) × shape (JSON/SSE). */
public interface ResponseProcessors {

  ContextObserver context(boolean eventStream);

  GenerationRewriter generation(boolean eventStream, UsageNames names);
}
