package io.disaggusage.extproc.exchange;

/**
 * The common part of the context-leg observers: every chunk is forwarded unchanged at once (nothing
 * is ever held); subclasses only read what passes.
 */
abstract class ForwardingContextObserver implements ContextObserver {
  private byte[] ready = Bytes.EMPTY;
  private boolean abandoned;

  @Override
  public final void accept(byte[] chunk) {
    ready = Bytes.concat(ready, chunk);
    if (!abandoned) {
      observe(chunk);
    }
  }

  @Override
  public final void finish() {
    if (!abandoned) {
      observeEnd();
    }
  }

  /** Reads one chunk that is being forwarded. */
  protected abstract void observe(byte[] chunk);

  /** The body ended. */
  protected abstract void observeEnd();

  @Override
  public final byte[] takeReady() {
    byte[] out = ready;
    ready = Bytes.EMPTY;
    return out;
  }

  @Override
  public final byte[] abandon() {
    abandoned = true;
    return takeReady();
  }

  @Override
  public ExchangeReport report() {
    ContextObservation o = observation();
    return new ExchangeReport(o.outcome(), null, false, o.model());
  }
}
