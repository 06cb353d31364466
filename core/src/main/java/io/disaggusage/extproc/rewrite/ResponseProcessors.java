package io.disaggusage.extproc.rewrite;

import io.disaggusage.extproc.inject.UsageRemoval;
import io.disaggusage.extproc.usage.ApiShape;
import java.util.function.Consumer;

/** Chooses the body processor for a response: leg (context/generation) × shape (JSON/SSE). */
public interface ResponseProcessors {

  ContextObserver context(boolean eventStream);

  GenerationRewriter generation(boolean eventStream, ApiShape shape);

  /**
   * The processors for an exchange whose request the service made ask for usage: event streams lose
   * the usage-only events that caused, and {@code result} hears once per body what became of them.
   */
  ResponseProcessors removingInjectedUsage(Consumer<UsageRemoval> result);
}
