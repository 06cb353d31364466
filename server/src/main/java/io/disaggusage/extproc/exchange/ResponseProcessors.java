package io.disaggusage.extproc.exchange;

import io.disaggusage.extproc.usage.ApiShape;

/** Chooses the body processor for a response: leg (context/generation) × shape (JSON/SSE). */
public interface ResponseProcessors {

  ContextObserver context(boolean eventStream);

  ResponseBodyProcessor generation(boolean eventStream, ApiShape shape);
}
