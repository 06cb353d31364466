package io.disaggusage.extproc.inject;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.exchange.ContextObserver;
import io.disaggusage.extproc.exchange.GenerationRewriter;
import io.disaggusage.extproc.exchange.ResponseProcessors;
import io.disaggusage.extproc.usage.UsageNames;
import java.util.function.Consumer;

/**
 * The body processors of an exchange whose request the service made ask for usage: the usual ones,
 * with the resulting usage-only events taken out of what they forward. Only streams carry such
 * events; JSON responses get the usual processors.
 */
public final class UsageRemovingProcessors implements ResponseProcessors {
  private final ResponseProcessors usual;
  private final JsonFactory json;
  private final int maxEventBytes;
  private final Consumer<UsageRemoval> result;

  public UsageRemovingProcessors(
      ResponseProcessors usual, JsonFactory json, int maxEventBytes, Consumer<UsageRemoval> result) {
    this.usual = usual;
    this.json = json;
    this.maxEventBytes = maxEventBytes;
    this.result = result;
  }

  @Override
  public ContextObserver context(boolean eventStream) {
    ContextObserver observer = usual.context(eventStream);
    return eventStream ? new UsageRemovingContextObserver(observer, remover(), result) : observer;
  }

  @Override
  public GenerationRewriter generation(boolean eventStream, UsageNames names) {
    GenerationRewriter processor = usual.generation(eventStream, names);
    return eventStream ? new UsageRemovingProcessor(processor, remover(), result) : processor;
  }

  private UsageEventRemover remover() {
    return new UsageEventRemover(json, maxEventBytes);
  }
}
