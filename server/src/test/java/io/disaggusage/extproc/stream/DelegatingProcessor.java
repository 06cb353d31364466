package io.disaggusage.extproc.stream;

import io.disaggusage.extproc.rewrite.ExchangeReport;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.rewrite.ResponseBodyProcessor;
import io.disaggusage.extproc.rewrite.GenerationRewriter;
import io.disaggusage.extproc.usage.ContextUsage;

/** A real generation rewriter behind a test's fault: subclasses override only where they inject it. */
abstract class DelegatingProcessor implements GenerationRewriter {
  protected final GenerationRewriter delegate;

  DelegatingProcessor(GenerationRewriter delegate) {
    this.delegate = delegate;
  }

  @Override
  public void accept(byte[] chunk) {
    delegate.accept(chunk);
  }

  @Override
  public void finish() {
    delegate.finish();
  }

  @Override
  public byte[] takeReady() {
    return delegate.takeReady();
  }

  @Override
  public boolean wantsContext() {
    return delegate.wantsContext();
  }

  @Override
  public boolean waiting() {
    return delegate.waiting();
  }

  @Override
  public void resolveContext(ContextUsage context, Outcome reasonIfNull) {
    delegate.resolveContext(context, reasonIfNull);
  }

  @Override
  public int usageReleased() {
    return delegate.usageReleased();
  }

  @Override
  public byte[] abandon() {
    return delegate.abandon();
  }

  @Override
  public ExchangeReport report() {
    return delegate.report();
  }
}
