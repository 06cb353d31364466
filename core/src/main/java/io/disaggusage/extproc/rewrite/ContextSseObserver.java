package io.disaggusage.extproc.rewrite;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.inject.InjectedUsageEvents;
import io.disaggusage.extproc.sse.SseEvent;
import io.disaggusage.extproc.sse.SseFramer;
import io.disaggusage.extproc.sse.SseItem;
import io.disaggusage.extproc.usage.ContextUsage;
import java.util.List;

/**
 * Observes a streaming context response (SGLang prefill streams when its client streamed; Anthropic
 * Messages streams): every chunk is forwarded unchanged at once; the usage of the last event whose
 * usage states a prompt count is kept, up to the stream's last event ({@link SseEvent#endsStream()}),
 * after which nothing changes it.
 *
 * <p>For a request the service made ask for usage, the usage-only events that caused are read as
 * usual and then left out of what is forwarded ({@link InjectedUsageEvents}): complete events go out as
 * they are framed, and the start of an event still being received as soon as it is certain not to be
 * one.
 */
public final class ContextSseObserver extends ForwardingContextObserver {
  private final JsonFactory json;
  private final SseFramer framer;
  private ContextUsage usage;
  private List<String> ids = List.of();
  private String model;
  private Outcome outcome = Outcome.NO_USAGE;
  private boolean lastEventSeen;

  /** Takes out the usage-only events an injected {@code include_usage} caused; null when none are. */
  private final InjectedUsageEvents injected;
  /** With {@link #injected}: what goes out for the chunk being observed. */
  private final ReadyBytes out = new ReadyBytes();
  // With injected: where the event being received starts in the stream, how many of its bytes went
  // out early, and whether the rest of it waits for its end (it may be a usage-only event).
  private long partialStart = -1;
  private int partialReleased;
  private boolean partialKept;
  private boolean abandoning;

  public ContextSseObserver(JsonFactory json, int maxEventBytes) {
    this(json, maxEventBytes, null);
  }

  /** An observer that also takes out the usage-only events {@code injected} names (null: none). */
  public ContextSseObserver(JsonFactory json, int maxEventBytes, InjectedUsageEvents injected) {
    this.json = json;
    this.injected = injected;
    this.framer = new SseFramer(maxEventBytes, this::onItem);
  }

  @Override
  protected void observe(byte[] chunk) {
    framer.feed(chunk);
    if (injected != null) {
      releaseStart(chunk);
    }
  }

  @Override
  protected void observeEnd() {
    framer.finish();
    if (injected != null) {
      injected.ended();
    }
  }

  @Override
  protected byte[] forwarded(byte[] chunk) {
    return injected == null ? chunk : out.take();
  }

  @Override
  protected byte[] keptBack() {
    if (injected == null) {
      return Bytes.EMPTY;
    }
    injected.abandoned();
    abandoning = true;
    if (!framer.isFinished()) {
      framer.finish(); // hands over the event being received, which goes out as it came
    }
    return out.take();
  }

  /**
   * Sends out the start of the event being received once it is certain not to be a usage-only event;
   * otherwise all of it waits for its end. {@code chunk} was just framed.
   */
  private void releaseStart(byte[] chunk) {
    int partial = framer.heldBytes();
    long start = framer.bytesFed() - partial;
    if (start != partialStart) {
      partialStart = start;
      partialReleased = 0;
      partialKept = false;
      injected.eventStarts();
    }
    int unreleased = partial - partialReleased;
    if (partialKept || unreleased == 0) {
      return;
    }
    if (unreleased > chunk.length || !injected.startIsNotUsageOnly(chunk, chunk.length - unreleased, chunk.length)) {
      partialKept = true;
      return;
    }
    out.add(chunk, chunk.length - unreleased, unreleased);
    partialReleased = partial;
  }

  private void onItem(SseItem item) {
    boolean mayCarryUsage = item instanceof SseEvent event && event.hasData() && event.mayContainUsage();
    if (!abandoning) {
      read(item, mayCarryUsage);
    }
    if (injected != null) {
      forward(item, mayCarryUsage);
    }
  }

  /** Sends out a framed item, less what went out early, unless it is a usage-only event to take out. */
  private void forward(SseItem item, boolean mayCarryUsage) {
    if (mayCarryUsage && !abandoning && partialReleased == 0 && injected.remove((SseEvent) item)) {
      return;
    }
    byte[] raw = item.rawArray();
    int skip = Math.min(partialReleased, raw.length);
    partialReleased -= skip;
    out.add(raw, skip, raw.length - skip);
  }

  private void read(SseItem item, boolean mayCarryUsage) {
    if (lastEventSeen || !(item instanceof SseEvent event) || !event.hasData()) {
      return;
    }
    lastEventSeen = event.endsStream();
    if (!mayCarryUsage) {
      return;
    }
    ContextObservation seen = ContextJsonObserver.observe(json, event.payloadBytes(), true);
    if (seen.model() != null) {
      model = seen.model();
    }
    if (!seen.contextIds().isEmpty()) {
      ids = seen.contextIds();
    }
    if (seen.outcome() != Outcome.NO_USAGE) {
      usage = seen.usage();
      outcome = seen.outcome();
    }
  }

  @Override
  public boolean contentEnded() {
    return lastEventSeen;
  }

  @Override
  public ContextObservation observation() {
    return new ContextObservation(usage, ids, null, model, outcome);
  }
}
