package io.disaggusage.extproc.exchange;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.usage.JsonUsageRewriter;
import io.disaggusage.extproc.usage.UsageNames;

/** The service's body processors, sized by the configured limits. */
public final class ProcessorFactory implements ResponseProcessors {
  private final JsonFactory json;
  private final JsonUsageRewriter rewriter;
  private final Config.Limits limits;

  public ProcessorFactory(JsonFactory json, Config.Limits limits) {
    this.json = json;
    this.rewriter = new JsonUsageRewriter(json, limits.maxUsageBytes());
    this.limits = limits;
  }

  @Override
  public ContextObserver context(boolean eventStream) {
    return eventStream
        ? new ContextSseObserver(json, limits.maxEventBytes())
        : new ContextJsonObserver(json, limits.maxBodyBytes());
  }

  @Override
  public GenerationRewriter generation(boolean eventStream, UsageNames names) {
    return eventStream
        ? new GenerationSseRewriter(rewriter, json, names, limits.maxEventBytes(), limits.maxBodyBytes())
        : new GenerationJsonRewriter(rewriter, names, limits.maxBodyBytes());
  }
}
