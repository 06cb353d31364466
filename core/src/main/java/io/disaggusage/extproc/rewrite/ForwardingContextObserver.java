package io.disaggusage.extproc.rewrite;

/**
 * The common part of the context-leg observers: every chunk is forwarded unchanged at once (nothing
 * waits for context usage); subclasses read what passes, and one that takes bytes out of the stream
 * says what goes out instead ({@link #forwarded}).
 */
abstract class ForwardingContextObserver implements ContextObserver {
  private byte[] ready = Bytes.EMPTY;
  private boolean abandoned;

  @Override
  public final void accept(byte[] chunk) {
    if (abandoned) {
      ready = Bytes.concat(ready, chunk);
      return;
    }
    observe(chunk);
    ready = Bytes.concat(ready, forwarded(chunk));
  }

  @Override
  public final void finish() {
    if (!abandoned) {
      observeEnd();
      ready = Bytes.concat(ready, forwarded(Bytes.EMPTY));
    }
  }

  /** Reads one chunk that is being forwarded. */
  protected abstract void observe(byte[] chunk);

  /** The body ended. */
  protected abstract void observeEnd();

  /**
   * What goes out after {@code chunk} was observed (after the end: {@code chunk} is empty): the chunk
   * itself, unless the subclass keeps bytes back or takes some out.
   */
  protected byte[] forwarded(byte[] chunk) {
    return chunk;
  }

  /** The observer is abandoned: the bytes it kept back, to go out unchanged. */
  protected byte[] keptBack() {
    return Bytes.EMPTY;
  }

  @Override
  public final byte[] takeReady() {
    byte[] out = ready;
    ready = Bytes.EMPTY;
    return out;
  }

  @Override
  public final byte[] abandon() {
    if (!abandoned) {
      abandoned = true;
      ready = Bytes.concat(ready, keptBack());
    }
    return takeReady();
  }

  @Override
  public ExchangeReport report() {
    ContextObservation o = observation();
    return new ExchangeReport(o.outcome(), null, false, o.model());
  }
}
