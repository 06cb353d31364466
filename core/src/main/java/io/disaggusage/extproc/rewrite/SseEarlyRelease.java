package io.disaggusage.extproc.rewrite;

import io.disaggusage.extproc.sse.SseFramer;
import java.util.function.BooleanSupplier;

/**
 * Feeds an SSE generation body to its framer and releases what may go out before the event holding
 * it completes: whole chunks with no {@code "usage"} key skip event building (the fast path), and the
 * start of the event still being received goes out up to its first {@code "usage"} key. It owns the
 * bookkeeping of that partial event — where it starts, how much of it went out early — so that the
 * complete event is not released twice ({@link #release}).
 */
final class SseEarlyRelease {
  private final SseFramer framer;
  private final InjectedUsageFilter injected;
  private final ReleasedSlices out;
  /** True while nothing may go out early: events are held, or the body is abandoned. */
  private final BooleanSupplier blocked;
  private final UsageKeyTail key = new UsageKeyTail();

  // The event still being received: where it starts in the stream, how much of it went out early and
  // whether releasing it early has stopped (a "usage" key, or bytes kept back).
  private long partialStart = -1;
  private long alreadyReleased;
  private boolean partialStopped;

  SseEarlyRelease(SseFramer framer, InjectedUsageFilter injected, ReleasedSlices out, BooleanSupplier blocked) {
    this.framer = framer;
    this.injected = injected;
    this.out = out;
    this.blocked = blocked;
  }

  /** Frames {@code chunk} and releases what of it may go out now. */
  void accept(byte[] chunk) {
    if (!mayPassUnchanged(chunk)) {
      framer.feed(chunk);
      forwardSafePrefix(chunk, 0);
      return;
    }
    int at = framer.skimUntil(chunk, UsageKeyTail.USAGE_KEY, UsageKeyTail.USAGE_KEY_ANCHOR);
    releaseSkimmed(chunk, at);
    if (at < chunk.length) {
      // From the key on, the usual way: the event holding it is framed, parsed and rewritten.
      framer.feed(chunk, at, chunk.length - at);
      forwardSafePrefix(chunk, at);
    }
  }

  /** Whether none of the item completing next went out early. */
  boolean nothingReleasedEarly() {
    return alreadyReleased == 0;
  }

  /** Releases a complete item's bytes, less those of its start that went out early. */
  void release(byte[] bytes) {
    int skip = 0;
    if (alreadyReleased > 0) {
      // The start of this item went out early (forwardSafePrefix); those bytes are the same here.
      skip = (int) Math.min(alreadyReleased, bytes.length);
      alreadyReleased -= skip;
    }
    out.add(bytes, skip, bytes.length - skip);
  }

  /**
   * Whether {@code chunk} may leave exactly as it came, up to the first {@code "usage"} key in it:
   * nothing is held or kept back, and no key straddles into it from the event still being received
   * (whose start went out already). Every event completing before the key is then content, and the
   * bytes before the key may go out whatever follows. So nearly every chunk of a stream — those with
   * no key at all — is framed in one pass together with the key search, without building or copying
   * its events, and leaves as the caller's own array, which the stream recognises as unchanged.
   */
  private boolean mayPassUnchanged(byte[] chunk) {
    if (blocked.getAsBoolean()) {
      return false;
    }
    int partial = framer.heldBytes();
    if (partial > 0
        && (framer.bytesFed() - partial != partialStart || partialStopped || alreadyReleased != partial)) {
      return false; // the event still being received has bytes kept back
    }
    return key.straddling(chunk, 0, chunk.length, partial == 0 ? 0 : key.length()) < 0;
  }

  /**
   * Releases {@code chunk[0, length)}, just skimmed, and notes how much of the partial event went out;
   * the start of a partial event that may still be a usage-only event is kept back instead.
   */
  private void releaseSkimmed(byte[] chunk, int length) {
    int partial = framer.heldBytes();
    notePartialEvent();
    int inChunk = Math.min(partial, length);
    if (inChunk > 0 && !injected.startMayGo(chunk, length - inChunk, length)) {
      partialStopped = true;
      length -= inChunk; // an event that began in this chunk: none of it has gone out
      partial = 0;
      inChunk = 0;
    }
    out.add(chunk, 0, length);
    alreadyReleased = partial;
    if (inChunk > 0) {
      key.remember(chunk, length - inChunk, inChunk);
    }
  }

  /**
   * Releases the start of the event still being received, up to the first {@code "usage"} in it: a
   * rewrite only ever changes the usage value, which comes after its key, so those bytes go out the
   * same whatever the rest of the event holds. Content events cut by a chunk boundary then leave with
   * their chunk, and the reply usually needs no body mutation at all. When the event completes, the
   * bytes already released are not released again ({@link #release}). {@code chunk[start, end)} is
   * what was just fed.
   */
  private void forwardSafePrefix(byte[] chunk, int start) {
    long heldStart = notePartialEvent();
    if (partialStopped || blocked.getAsBoolean() || framer.heldBytes() == 0) {
      return;
    }
    long chunkStart = framer.bytesFed() - (chunk.length - start);
    long from = heldStart + alreadyReleased;
    if (from < chunkStart) {
      partialStopped = true; // bytes before this chunk were kept back: keep the rest with them
      return;
    }
    int offset = start + (int) (from - chunkStart);
    int length = chunk.length - offset;
    if (!injected.startMayGo(chunk, offset, chunk.length)) {
      partialStopped = true; // it may be a usage-only event: all of it waits for its end
      return;
    }
    int usage = key.indexOf(chunk, offset, length);
    int safe = usage < 0 ? length : usage;
    if (usage >= 0 && usage < key.length()) {
      safe = 0; // the key began in bytes released before: release nothing more of this event
    } else if (usage >= 0) {
      safe = usage - key.length();
    }
    if (usage >= 0) {
      partialStopped = true;
    }
    if (safe > 0) {
      // The whole chunk is the common case (content events cut at the chunk's end): no copy.
      out.add(chunk, offset, safe);
      alreadyReleased += safe;
      key.remember(chunk, offset, safe);
    }
  }

  /**
   * Where the event the framer holds starts in the stream; when that is a new event, nothing of it
   * has been released or stopped yet.
   */
  private long notePartialEvent() {
    long heldStart = framer.bytesFed() - framer.heldBytes();
    if (heldStart != partialStart) {
      partialStart = heldStart;
      partialStopped = false;
      key.reset();
      injected.eventStarts();
    }
    return heldStart;
  }
}
