package io.disaggusage.extproc.inject;

import io.disaggusage.extproc.exchange.ContextObservation;
import io.disaggusage.extproc.exchange.ContextObserver;
import java.util.function.Consumer;

/**
 * A context-leg observer whose forwarded stream loses the usage event the service's request edit
 * caused (SGLang context legs stream when the client did): the observer still reads the usage, and
 * the orchestrator receives the stream it would have received.
 */
public final class UsageRemovingContextObserver extends UsageRemovingFilter<ContextObserver>
    implements ContextObserver {

  public UsageRemovingContextObserver(ContextObserver inner, UsageEventRemover remover, Consumer<UsageRemoval> result) {
    super(inner, remover, result);
  }

  @Override
  protected boolean innerWaiting() {
    return false; // an observer forwards every byte at once
  }

  @Override
  public ContextObservation observation() {
    return inner.observation();
  }

  @Override
  public boolean contentEnded() {
    return inner.contentEnded();
  }
}
