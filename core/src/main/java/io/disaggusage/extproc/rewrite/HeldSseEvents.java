package io.disaggusage.extproc.rewrite;

import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.sse.SseItem;
import io.disaggusage.extproc.usage.ContextUsage;
import java.util.ArrayDeque;
import java.util.function.Consumer;

/**
 * Hold-and-release while an SSE generation leg awaits its context usage: the first usage-bearing
 * event and everything after it wait here, in order, until the context usage is resolved (or the
 * caller gives up), and then go to the release sink. Held bytes are bounded by {@code maxBytes}; the
 * caller is told when a held item goes beyond it.
 */
final class HeldSseEvents {
  private final ContextResolution resolved = new ContextResolution();
  private final ArrayDeque<SseItem> items = new ArrayDeque<>();
  private final int maxBytes;
  /** Where held items go once the context usage is resolved. */
  private final Consumer<SseItem> release;
  private long bytes;
  private boolean wanted;

  HeldSseEvents(int maxBytes, Consumer<SseItem> release) {
    this.maxBytes = maxBytes;
    this.release = release;
  }

  /** What the leg was told about its context usage. */
  ContextResolution resolution() {
    return resolved;
  }

  /** Whether items are held. */
  boolean holding() {
    return !items.isEmpty();
  }

  /** Some item waited for the context usage, which has not been resolved yet. */
  boolean wantsContext() {
    return wanted && !resolved.known();
  }

  /** Holds {@code item}, the first to need the context usage. @return as {@link #hold} */
  boolean awaitContext(SseItem item) {
    wanted = true;
    return hold(item);
  }

  /**
   * Holds {@code item} behind those held already.
   *
   * @return true when held bytes went beyond the limit: the caller gives up waiting
   */
  boolean hold(SseItem item) {
    items.add(item);
    bytes += item.rawLength();
    return bytes > maxBytes;
  }

  /** Resolves the context usage (first call wins); held items are then released in order. */
  void resolve(ContextUsage context, Outcome reasonIfNull) {
    if (resolved.resolve(context, reasonIfNull)) {
      releaseAll();
    }
  }

  /** Releases every held item, in order. */
  void releaseAll() {
    while (!items.isEmpty()) {
      SseItem item = items.poll();
      bytes -= item.rawLength();
      release.accept(item);
    }
  }
}
