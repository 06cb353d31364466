package io.disaggusage.extproc.inject;

import io.disaggusage.extproc.exchange.GenerationRewriter;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.usage.ContextUsage;
import java.util.function.Consumer;

/** A generation rewriter whose output loses the usage-only events the service's request edit caused. */
public final class UsageRemovingProcessor extends UsageRemovingFilter<GenerationRewriter>
    implements GenerationRewriter {

  public UsageRemovingProcessor(GenerationRewriter inner, UsageEventRemover remover, Consumer<UsageRemoval> result) {
    super(inner, remover, result);
  }

  @Override
  protected boolean innerWaiting() {
    return inner.waiting();
  }

  @Override
  public boolean wantsContext() {
    return inner.wantsContext();
  }

  @Override
  public boolean waiting() {
    return inner.waiting();
  }

  @Override
  public void resolveContext(ContextUsage context, Outcome reasonIfNull) {
    inner.resolveContext(context, reasonIfNull);
  }

  @Override
  public int usageReleased() {
    return inner.usageReleased();
  }
}
