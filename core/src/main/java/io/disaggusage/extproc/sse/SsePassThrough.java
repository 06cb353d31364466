package io.disaggusage.extproc.sse;

import java.util.Objects;

/**
 * Bytes that {@link SseFramer} passes through without framing them as an {@link SseEvent}; a caller
 * forwards them unchanged.
 */
public final class SsePassThrough implements SseItem {

  /** Why the bytes are passed through. */
  public enum Kind {
    /**
     * Bytes outside any event: one blank line that does not end an event (e.g. an extra blank line
     * between two events). One item per blank line. At end of stream it can also be a lone byte-order
     * mark that never got a line terminator.
     */
    INTER_EVENT,
    /**
     * A piece of an event whose raw size exceeds the framer's {@code maxEventBytes}. The first piece of
     * such an event has {@link #startsOversizeEvent()} set; the following pieces (one per fed chunk,
     * as the bytes arrive) continue the same event, up to and including its terminating blank line.
     */
    OVERSIZE
  }

  private final byte[] raw;
  private final Kind kind;
  private final boolean startsOversizeEvent;

  SsePassThrough(byte[] raw, Kind kind, boolean startsOversizeEvent) {
    this.raw = Objects.requireNonNull(raw, "raw");
    this.kind = Objects.requireNonNull(kind, "kind");
    this.startsOversizeEvent = startsOversizeEvent;
  }

  @Override
  public byte[] rawArray() {
    return raw;
  }

  public Kind kind() {
    return kind;
  }

  /** Whether these bytes belong to an oversize event. */
  public boolean isOversize() {
    return kind == Kind.OVERSIZE;
  }

  /**
   * Whether this is the first piece of an oversize event: count these to count oversize events (each
   * oversize event yields exactly one such piece).
   */
  public boolean startsOversizeEvent() {
    return startsOversizeEvent;
  }

  @Override
  public String toString() {
    return "SsePassThrough{" + kind + (startsOversizeEvent ? ", start" : "") + ", "
        + SseEvent.escape(raw, 0, raw.length, 80) + "}";
  }
}
