package io.disaggusage.extproc.exchange;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.usage.JsonUsageRewriter;
import io.disaggusage.extproc.usage.UsageNames;

/** Creates the body processor that fits a response: leg (context/generation) × shape (JSON/SSE). */
public final class ProcessorFactory {
  private final JsonFactory json;
  private final JsonUsageRewriter rewriter;
  private final Config.Limits limits;

  public ProcessorFactory(JsonFactory json, Config.Limits limits) {
    this.json = json;
    this.rewriter = new JsonUsageRewriter(json, limits.maxUsageBytes());
    this.limits = limits;
  }

  public ContextObserver context(boolean eventStream) {
    return eventStream
        ? new ContextSseObserver(json, limits.maxEventBytes())
        : new ContextJsonObserver(json, limits.maxBodyBytes());
  }

  public ResponseBodyProcessor generation(boolean eventStream, UsageNames names) {
    return eventStream
        ? new GenerationSseRewriter(rewriter, json, names, limits.maxEventBytes(), limits.maxBodyBytes())
        : new GenerationJsonRewriter(rewriter, names, limits.maxBodyBytes());
  }
}
