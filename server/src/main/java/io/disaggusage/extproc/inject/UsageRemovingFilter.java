package io.disaggusage.extproc.inject;

import io.disaggusage.extproc.exchange.Bytes;
import io.disaggusage.extproc.exchange.ExchangeReport;
import io.disaggusage.extproc.exchange.ResponseBodyProcessor;
import java.util.function.Consumer;

/**
 * A body filter whose output loses the usage-only events the service's own request edit caused. The
 * wrapped filter sees every byte as the engine sent it, so its report (metrics, dynamic metadata) has
 * the usage numbers — corrected where it corrects them; only what leaves for the client is filtered,
 * by a {@link UsageEventRemover}. The result is reported once: at the end of the body, or
 * {@link UsageRemoval#LEAKED} when the exchange is abandoned before anything was removed.
 *
 * @param <P> the wrapped filter, whose further capabilities the subclass passes on
 */
abstract class UsageRemovingFilter<P extends ResponseBodyProcessor> implements ResponseBodyProcessor {
  protected final P inner;
  private final UsageEventRemover remover;
  private final Consumer<UsageRemoval> result;
  private boolean finished;
  private boolean done;

  UsageRemovingFilter(P inner, UsageEventRemover remover, Consumer<UsageRemoval> result) {
    this.inner = inner;
    this.remover = remover;
    this.result = result;
  }

  /** True while the wrapped filter still holds bytes back (for the context usage). */
  protected abstract boolean innerWaiting();

  @Override
  public void accept(byte[] chunk) {
    inner.accept(chunk);
  }

  @Override
  public void finish() {
    inner.finish();
    finished = true;
  }

  @Override
  public byte[] takeReady() {
    byte[] ready = remover.filter(inner.takeReady());
    if (finished && !done && !innerWaiting()) {
      // Everything the engine sent has come through: the last, unterminated event is judged now.
      ready = Bytes.concat(ready, remover.finish());
      report(remover.removed() > 0 ? UsageRemoval.REMOVED : UsageRemoval.ABSENT);
    }
    return ready;
  }

  @Override
  public byte[] abandon() {
    // What the remover holds came out of the processor first, so it goes first.
    byte[] held = Bytes.concat(remover.abandon(), inner.abandon());
    report(remover.removed() > 0 ? UsageRemoval.REMOVED : UsageRemoval.LEAKED);
    return held;
  }

  @Override
  public ExchangeReport report() {
    return inner.report();
  }

  private void report(UsageRemoval removal) {
    if (!done) {
      done = true;
      result.accept(removal);
    }
  }
}
