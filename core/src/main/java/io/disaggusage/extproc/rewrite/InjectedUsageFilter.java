package io.disaggusage.extproc.rewrite;

import io.disaggusage.extproc.inject.InjectedUsageEvents;
import io.disaggusage.extproc.sse.SseEvent;

/**
 * The include-usage injection as an SSE generation leg sees it: for a request the service made ask
 * for usage, the usage-only events that caused are read as usual and then left out of what is
 * forwarded ({@link InjectedUsageEvents}), and the start of an event still being received goes out
 * early only once it is certain not to be one. Without injection every answer is the pass-through
 * one, so the stream machinery never asks whether injection is on.
 */
final class InjectedUsageFilter {
  /** Null when usage-only events are forwarded. */
  private final InjectedUsageEvents events;
  /** The event being received is known not to be usage-only (always, without injection). */
  private boolean startNotUsageOnly;

  InjectedUsageFilter(InjectedUsageEvents events) {
    this.events = events;
    this.startNotUsageOnly = events == null;
  }

  /** A new event starts being received. */
  void eventStarts() {
    startNotUsageOnly = events == null;
    if (events != null) {
      events.eventStarts();
    }
  }

  /**
   * Whether the start of the event being received may go out before it completes: not while it may
   * still be a usage-only event to take out. {@code chunk[from, to)} are its next bytes, read once.
   */
  boolean startMayGo(byte[] chunk, int from, int to) {
    if (!startNotUsageOnly) {
      startNotUsageOnly = events.startIsNotUsageOnly(chunk, from, to);
    }
    return startNotUsageOnly;
  }

  /** Whether {@code event}, complete and not started early, is taken out (and counted as removed). */
  boolean removes(SseEvent event) {
    return events != null && events.remove(event);
  }

  /**
   * How many usage-bearing events reached the client of {@code taken} handed out: none while
   * usage-only events are taken out — the client asked for no usage, and the one event that would
   * carry it does not reach it.
   */
  int usageReleased(int taken) {
    return events == null ? taken : 0;
  }

  /** Everything the engine sent has come through. */
  void ended() {
    if (events != null) {
      events.ended();
    }
  }

  /** The body is let through unmodified from now on. */
  void abandoned() {
    if (events != null) {
      events.abandoned();
    }
  }
}
