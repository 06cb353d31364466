package io.disaggusage.extproc.rewrite;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.inject.InjectedUsageEvents;
import io.disaggusage.extproc.inject.UsageRemoval;
import io.disaggusage.extproc.usage.ApiShape;
import io.disaggusage.extproc.usage.JsonUsageRewriter;
import java.util.function.Consumer;

/** The service's body processors, sized by the configured limits. */
public final class ProcessorFactory implements ResponseProcessors {
  private final JsonFactory json;
  private final JsonUsageRewriter rewriter;
  private final BodyLimits limits;
  /** Hears what became of an injected usage event; null when usage-only events are forwarded. */
  private final Consumer<UsageRemoval> removal;

  public ProcessorFactory(JsonFactory json, BodyLimits limits) {
    this(json, new JsonUsageRewriter(json, limits.maxUsageBytes()), limits, null);
  }

  private ProcessorFactory(
      JsonFactory json, JsonUsageRewriter rewriter, BodyLimits limits, Consumer<UsageRemoval> removal) {
    this.json = json;
    this.rewriter = rewriter;
    this.limits = limits;
    this.removal = removal;
  }

  @Override
  public ContextObserver context(boolean eventStream) {
    return eventStream
        ? new ContextSseObserver(json, limits.maxEventBytes(), injectedUsage())
        : new ContextJsonObserver(json, limits.maxBodyBytes());
  }

  @Override
  public GenerationRewriter generation(boolean eventStream, ApiShape shape) {
    return eventStream
        ? new GenerationSseRewriter(
            rewriter, json, shape, limits.maxEventBytes(), limits.maxBodyBytes(), injectedUsage())
        : new GenerationJsonRewriter(rewriter, shape, limits.maxBodyBytes());
  }

  @Override
  public ResponseProcessors removingInjectedUsage(Consumer<UsageRemoval> result) {
    return new ProcessorFactory(json, rewriter, limits, result);
  }

  /** The usage-only events one stream takes out; null when none are. */
  private InjectedUsageEvents injectedUsage() {
    return removal == null ? null : new InjectedUsageEvents(json, removal);
  }
}
