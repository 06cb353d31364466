package io.disaggusage.extproc.inject;

import io.disaggusage.extproc.rewrite.Bytes;
import io.disaggusage.extproc.rewrite.ExchangeReport;
import io.disaggusage.extproc.rewrite.Outcome;
import io.disaggusage.extproc.rewrite.ResponseBodyProcessor;
import io.disaggusage.extproc.usage.ContextUsage;
import java.util.function.Consumer;

/**
 * A response body processor whose output loses the usage-only events the service's own request edit
 * caused. The wrapped processor sees every byte as the engine sent it, so its report (metrics,
 * dynamic metadata) has the usage numbers — corrected where it corrects them; only what leaves for
 * the client is filtered, by a {@link UsageEventRemover}. The result is reported once: at the end of
 * the body, or {@link UsageRemoval#LEAKED} when the exchange is abandoned before anything was removed.
 */
public class UsageRemovingProcessor implements ResponseBodyProcessor {
  private final ResponseBodyProcessor inner;
  private final UsageEventRemover remover;
  private final Consumer<UsageRemoval> result;
  private boolean finished;
  private boolean done;

  public UsageRemovingProcessor(ResponseBodyProcessor inner, UsageEventRemover remover, Consumer<UsageRemoval> result) {
    this.inner = inner;
    this.remover = remover;
    this.result = result;
  }

  /** The wrapped processor. */
  protected ResponseBodyProcessor inner() {
    return inner;
  }

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
    if (finished && !done && !inner.waiting()) {
      // Everything the engine sent has come through: the last, unterminated event is judged now.
      ready = Bytes.concat(ready, remover.finish());
      report(remover.removed() > 0 ? UsageRemoval.REMOVED : UsageRemoval.ABSENT);
    }
    return ready;
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
