package io.disaggusage.extproc.rewrite;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.inject.InjectedUsageEvents;
import io.disaggusage.extproc.sse.SseEvent;
import io.disaggusage.extproc.sse.SseFramer;
import io.disaggusage.extproc.sse.SseItem;
import io.disaggusage.extproc.sse.SsePassThrough;
import io.disaggusage.extproc.usage.ApiShape;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.JsonUsageRewriter;

/**
 * A streaming (SSE) generation response. Events go out as soon as they are complete; every event
 * whose JSON carries a non-null usage object is rewritten in place with the context usage
 * (behaviour.md §5). Without the context usage yet, the first usage-bearing event and everything
 * after it are held — content before it is never delayed — until the usage lands or the caller gives
 * up ({@link #resolveContext} with null). Held bytes are bounded by {@code maxHeldBytes}; beyond it
 * they are released unmodified and the exchange counts as oversize.
 *
 * <p>This class owns the leg's lifecycle and routes each framed item; the jobs are its
 * collaborators': {@link SseEarlyRelease} (framing and release before an event completes), {@link
 * HeldSseEvents} (hold-and-release while the context usage is awaited), {@link SseUsageRewrite} (the
 * usage rewrite), {@link InjectedUsageFilter} (taking out the usage-only events an injected {@code
 * include_usage} caused) and {@link SseOutcome} (the report).
 */
public final class GenerationSseRewriter implements GenerationRewriter {
  private final SseFramer framer;
  private final ReleasedSlices ready = new ReleasedSlices();
  private final InjectedUsageFilter injected;
  private final SseEarlyRelease early;
  private final HeldSseEvents held;
  private final SseOutcome outcome = new SseOutcome();
  private final SseUsageRewrite usage;
  private boolean finished;
  private boolean abandoning;

  public GenerationSseRewriter(
      JsonUsageRewriter rewriter, JsonFactory json, ApiShape shape, int maxEventBytes, int maxHeldBytes) {
    this(rewriter, json, shape, maxEventBytes, maxHeldBytes, null);
  }

  /** A rewriter that also takes out the usage-only events {@code injected} names (null: none). */
  public GenerationSseRewriter(
      JsonUsageRewriter rewriter,
      JsonFactory json,
      ApiShape shape,
      int maxEventBytes,
      int maxHeldBytes,
      InjectedUsageEvents injected) {
    this.injected = new InjectedUsageFilter(injected);
    this.framer = new SseFramer(maxEventBytes, this::onItem);
    this.held = new HeldSseEvents(maxHeldBytes, this::releaseHeld);
    this.early = new SseEarlyRelease(framer, this.injected, ready, () -> abandoning || held.holding());
    this.usage = new SseUsageRewrite(rewriter, json, shape, held.resolution(), outcome);
  }

  @Override
  public void accept(byte[] chunk) {
    early.accept(chunk);
  }

  @Override
  public void finish() {
    finished = true;
    framer.finish();
  }

  /**
   * {@inheritDoc} None while usage-only events are taken out: the client asked for no usage, and the
   * one event that would carry it does not reach it.
   */
  @Override
  public int usageReleased() {
    return injected.usageReleased(outcome.taken());
  }

  @Override
  public byte[] takeReady() {
    outcome.handedOut();
    if (finished && !held.holding()) {
      injected.ended(); // everything the engine sent has come through
    }
    return ready.take();
  }

  @Override
  public boolean wantsContext() {
    return held.wantsContext();
  }

  @Override
  public boolean waiting() {
    return held.holding();
  }

  @Override
  public void resolveContext(ContextUsage context, Outcome reasonIfNull) {
    held.resolve(context, reasonIfNull);
  }

  @Override
  public byte[] abandon() {
    abandoning = true;
    injected.abandoned();
    held.releaseAll();
    if (!framer.isFinished()) {
      framer.finish(); // hands over the partial event, which goes out raw after the held ones
    }
    return takeReady();
  }

  @Override
  public ExchangeReport report() {
    return outcome.report(framer.oversizeEventCount());
  }

  private void onItem(SseItem item) {
    if (abandoning) {
      early.release(item.rawArray());
      return;
    }
    if (item instanceof SsePassThrough pass && pass.startsOversizeEvent()) {
      outcome.oversizeEvent();
    }
    if (held.holding()) {
      hold(held.hold(item));
      return;
    }
    if (item instanceof SseEvent event && usage.carriesUsage(event)) {
      if (held.resolution().known()) {
        process(event);
      } else {
        hold(held.awaitContext(item));
      }
      return;
    }
    early.release(item.rawArray());
  }

  /** After an item was held: beyond the limit, waiting any longer would hold an unbounded stream. */
  private void hold(boolean overLimit) {
    if (overLimit) {
      // Let everything through as it is.
      outcome.heldOversize();
      held.resolve(null, Outcome.OVERSIZE);
    }
  }

  private void releaseHeld(SseItem item) {
    if (!abandoning && item instanceof SseEvent event && event.hasData() && event.mayContainUsage()) {
      process(event);
    } else {
      early.release(item.rawArray());
    }
  }

  /**
   * Rewrites one event that may carry usage, with the context usage or the fallback. An unexpected
   * failure here costs only this event's correction: it goes out as it came, and the stream goes on.
   */
  private void process(SseEvent event) {
    try {
      releaseUsageEvent(event, usage.rewrite(event));
    } catch (RuntimeException e) {
      outcome.record(Outcome.ERROR, null);
      releaseUsageEvent(event, event.rawArray());
    }
  }

  /**
   * Releases {@code bytes}, what becomes of an event that may carry usage, unless it is a usage-only
   * event to take out (none of which went out early).
   */
  private void releaseUsageEvent(SseEvent event, byte[] bytes) {
    if (!abandoning && early.nothingReleasedEarly() && injected.removes(event)) {
      return;
    }
    early.release(bytes);
  }
}
