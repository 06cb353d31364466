package io.disaggusage.extproc.rewrite;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.inject.InjectedUsageEvents;
import io.disaggusage.extproc.json.ByteEdits;
import io.disaggusage.extproc.sse.ByteSearch;
import io.disaggusage.extproc.sse.SseEvent;
import io.disaggusage.extproc.sse.SseFramer;
import io.disaggusage.extproc.sse.SseItem;
import io.disaggusage.extproc.sse.SsePassThrough;
import io.disaggusage.extproc.usage.ApiShape;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.JsonUsageRewriter;
import io.disaggusage.extproc.usage.UsageDocument;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * A streaming (SSE) generation response. Events go out as soon as they are complete; every event
 * whose JSON carries a non-null usage object is rewritten in place with the context usage
 * (behaviour.md §5). Without the context usage yet, the first usage-bearing event and everything
 * after it are held — content before it is never delayed — until the usage lands or the caller gives
 * up ({@link #resolveContext} with null). Held bytes are bounded by {@code maxHeldBytes}; beyond it
 * they are released unmodified and the exchange counts as oversize.
 *
 * <p>For a request the service made ask for usage, the usage-only events that caused are read as
 * usual and then left out of what is forwarded ({@link InjectedUsageEvents}); the start of an event
 * still being received then goes out early only once it is certain not to be one.
 */
public final class GenerationSseRewriter implements GenerationRewriter {
  private final JsonUsageRewriter rewriter;
  private final JsonFactory json;
  private final ApiShape shape;
  private final int maxHeldBytes;
  private final SseFramer framer;
  /** Takes out the usage-only events an injected {@code include_usage} caused; null when none are. */
  private final InjectedUsageEvents injected;

  /**
   * Bytes released since the last {@link #takeReady}: slices of arrays nothing writes again (chunks as
   * the caller gave them, events as framed or patched), joined once when taken — one copy of a chunk
   * that leaves changed, none of one that leaves whole — so no output buffer grows per chunk or stays
   * chunk-sized while the stream idles.
   */
  private final ArrayList<Slice> ready = new ArrayList<>();

  private record Slice(byte[] bytes, int from, int length) {}
  private int readyBytes;
  private final ArrayDeque<SseItem> held = new ArrayDeque<>();

  // The event still being received: where it starts in the stream, how much of it went out early,
  // whether releasing it early has stopped (a "usage" key, or bytes kept back), and the last bytes
  // released (a "usage" key may straddle two chunks).
  private long partialStart = -1;
  private long alreadyReleased;
  private boolean partialStopped;
  private boolean partialNotUsageOnly; // known not to be a usage-only event (always, without injection)
  private final byte[] tail = new byte[USAGE_KEY.length - 1];
  private int partialTail;
  private long heldBytes;

  private final ContextResolution resolved = new ContextResolution();
  private boolean wantContext;
  private boolean finished;
  private boolean abandoning;

  /** Usage-bearing events released into {@link #ready}, and those of them handed out by takeReady. */
  private int usageEventsReleased;
  private int usageEventsTaken;
  private Outcome lastUsageOutcome = Outcome.NO_USAGE;
  private ExchangeReport lastUsageReport;
  private boolean oversizeSeen;
  private boolean correctedAny;
  /** Some usage event held a count that cannot be true (it went out corrected). */
  private boolean impossibleAny;
  private String model;

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
    this.rewriter = rewriter;
    this.json = json;
    this.shape = shape;
    this.maxHeldBytes = maxHeldBytes;
    this.injected = injected;
    this.partialNotUsageOnly = injected == null;
    this.framer = new SseFramer(maxEventBytes, this::onItem);
  }

  @Override
  public void accept(byte[] chunk) {
    if (!mayPassUnchanged(chunk)) {
      framer.feed(chunk);
      forwardSafePrefix(chunk, 0);
      return;
    }
    int key = framer.skimUntil(chunk, USAGE_KEY, USAGE_KEY_ANCHOR);
    releaseSkimmed(chunk, key);
    if (key < chunk.length) {
      // From the key on, the usual way: the event holding it is framed, parsed and rewritten.
      framer.feed(chunk, key, chunk.length - key);
      forwardSafePrefix(chunk, key);
    }
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
    if (abandoning || !held.isEmpty()) {
      return false;
    }
    int partial = framer.heldBytes();
    if (partial > 0
        && (framer.bytesFed() - partial != partialStart || partialStopped || alreadyReleased != partial)) {
      return false; // the event still being received has bytes kept back
    }
    return straddlingUsageKey(chunk, 0, chunk.length, partial == 0 ? 0 : partialTail) < 0;
  }

  /**
   * Releases {@code chunk[0, length)}, just skimmed, and notes how much of the partial event went out;
   * the start of a partial event that may still be a usage-only event is kept back instead.
   */
  private void releaseSkimmed(byte[] chunk, int length) {
    int partial = framer.heldBytes();
    notePartialEvent();
    int inChunk = Math.min(partial, length);
    if (inChunk > 0 && !partialMayGo(chunk, length - inChunk, length)) {
      partialStopped = true;
      length -= inChunk; // an event that began in this chunk: none of it has gone out
      partial = 0;
      inChunk = 0;
    }
    if (length > 0) {
      addReady(chunk, 0, length);
    }
    alreadyReleased = partial;
    if (inChunk > 0) {
      rememberTail(chunk, length - inChunk, inChunk);
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
    if (partialStopped || abandoning || !held.isEmpty() || framer.heldBytes() == 0) {
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
    if (!partialMayGo(chunk, offset, chunk.length)) {
      partialStopped = true; // it may be a usage-only event: all of it waits for its end
      return;
    }
    int usage = indexOfUsageKey(chunk, offset, length);
    int safe = usage < 0 ? length : usage;
    if (usage >= 0 && usage < partialTail) {
      safe = 0; // the key began in bytes released before: release nothing more of this event
    } else if (usage >= 0) {
      safe = usage - partialTail;
    }
    if (usage >= 0) {
      partialStopped = true;
    }
    if (safe > 0) {
      // The whole chunk is the common case (content events cut at the chunk's end): no copy.
      addReady(chunk, offset, safe);
      alreadyReleased += safe;
      rememberTail(chunk, offset, safe);
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
      partialTail = 0;
      partialNotUsageOnly = injected == null;
      if (injected != null) {
        injected.eventStarts();
      }
    }
    return heldStart;
  }

  /**
   * Whether the start of the event being received may go out before it completes: not while it may
   * still be a usage-only event to take out. {@code chunk[from, to)} are its next bytes, read once.
   */
  private boolean partialMayGo(byte[] chunk, int from, int to) {
    if (!partialNotUsageOnly) {
      partialNotUsageOnly = injected.startIsNotUsageOnly(chunk, from, to);
    }
    return partialNotUsageOnly;
  }

  private static final byte[] USAGE_KEY = {'"', 'u', 's', 'a', 'g', 'e', '"'};
  /** The key's {@code g}: far rarer in JSON than its quote, so the search runs on it. */
  private static final int USAGE_KEY_ANCHOR = 4;

  /**
   * Where {@code "usage"} starts in the last released tail of this event followed by
   * {@code chunk[offset, offset+length)}, as an index into that concatenation; -1 when absent.
   */
  private int indexOfUsageKey(byte[] chunk, int offset, int length) {
    int straddling = straddlingUsageKey(chunk, offset, length, partialTail);
    if (straddling >= 0) {
      return straddling;
    }
    int at = ByteSearch.indexOf(chunk, offset, offset + length, USAGE_KEY, USAGE_KEY_ANCHOR);
    return at < 0 ? -1 : partialTail + at - offset;
  }

  /**
   * A {@code "usage"} key that starts in the first {@code tailLength} bytes of {@link #tail} and ends
   * in {@code chunk[offset, offset+length)}: its start in that concatenation, or -1.
   */
  private int straddlingUsageKey(byte[] chunk, int offset, int length, int tailLength) {
    for (int i = 0; i < tailLength && i + USAGE_KEY.length <= tailLength + length; i++) {
      boolean match = true;
      for (int k = 0; k < USAGE_KEY.length && match; k++) {
        int at = i + k;
        byte b = at < tailLength ? tail[at] : chunk[offset + at - tailLength];
        match = b == USAGE_KEY[k];
      }
      if (match) {
        return i;
      }
    }
    return -1;
  }

  /** Keeps the last (at most six) released bytes of this event, without copying the chunk. */
  private void rememberTail(byte[] chunk, int offset, int length) {
    int keep = tail.length;
    if (length >= keep) {
      System.arraycopy(chunk, offset + length - keep, tail, 0, keep);
      partialTail = keep;
      return;
    }
    int fromOld = Math.min(partialTail, keep - length);
    System.arraycopy(tail, partialTail - fromOld, tail, 0, fromOld);
    System.arraycopy(chunk, offset, tail, fromOld, length);
    partialTail = fromOld + length;
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
    return injected == null ? usageEventsTaken : 0;
  }

  @Override
  public byte[] takeReady() {
    usageEventsTaken = usageEventsReleased;
    if (injected != null && finished && held.isEmpty()) {
      injected.ended(); // everything the engine sent has come through
    }
    if (readyBytes == 0) {
      ready.clear();
      return Bytes.EMPTY;
    }
    byte[] out;
    Slice first = ready.get(0);
    if (ready.size() == 1 && first.from() == 0 && first.length() == first.bytes().length) {
      out = first.bytes(); // one whole array (usually the chunk as it came): no copy
    } else {
      out = new byte[readyBytes];
      int at = 0;
      for (Slice slice : ready) {
        System.arraycopy(slice.bytes(), slice.from(), out, at, slice.length());
        at += slice.length();
      }
    }
    ready.clear();
    readyBytes = 0;
    return out;
  }

  @Override
  public boolean wantsContext() {
    return wantContext && !resolved.known();
  }

  @Override
  public boolean waiting() {
    return !held.isEmpty();
  }

  @Override
  public void resolveContext(ContextUsage context, Outcome reasonIfNull) {
    if (resolved.resolve(context, reasonIfNull)) {
      releaseHeld();
    }
  }

  @Override
  public byte[] abandon() {
    abandoning = true;
    if (injected != null) {
      injected.abandoned();
    }
    releaseHeld();
    if (!framer.isFinished()) {
      framer.finish(); // hands over the partial event, which goes out raw after the held ones
    }
    return takeReady();
  }

  @Override
  public ExchangeReport report() {
    Outcome outcome = lastUsageOutcome;
    if (outcome == Outcome.NO_USAGE && (oversizeSeen || framer.oversizeEventCount() > 0)) {
      outcome = Outcome.OVERSIZE;
    }
    if (lastUsageReport != null && outcome == lastUsageReport.outcome()) {
      return new ExchangeReport(
          impossibleAny ? Outcome.IMPOSSIBLE_COUNT : outcome, lastUsageReport.figures(), correctedAny, model);
    }
    return new ExchangeReport(outcome, null, correctedAny, model);
  }

  private void onItem(SseItem item) {
    if (abandoning) {
      emitRaw(item);
      return;
    }
    if (item instanceof SsePassThrough pass && pass.startsOversizeEvent()) {
      oversizeSeen = true;
    }
    if (!held.isEmpty()) {
      hold(item);
      return;
    }
    if (item instanceof SseEvent event && carriesUsage(event)) {
      if (resolved.known()) {
        process(event);
      } else {
        wantContext = true;
        hold(item);
      }
      return;
    }
    emitRaw(item);
  }

  /** Whether the event's JSON has a non-null usage object (parsing only events that may have one). */
  private boolean carriesUsage(SseEvent event) {
    if (!event.hasData() || !event.mayContainUsage()) {
      return false;
    }
    if (resolved.known()) {
      return true; // process() parses anyway and treats a usage-less event as content
    }
    try {
      return UsageDocument.parse(json, event.payloadBytes()).usage() != null;
    } catch (UsageDocument.MalformedException e) {
      lastUsageOutcome = Outcome.PARSE_ERROR; // counted; the event goes out as it came
      lastUsageReport = null;
      return false;
    }
  }

  private void hold(SseItem item) {
    held.add(item);
    heldBytes += item.rawLength();
    if (heldBytes > maxHeldBytes) {
      // Waiting any longer would hold an unbounded stream: let everything through as it is.
      oversizeSeen = true;
      lastUsageOutcome = Outcome.OVERSIZE;
      resolveContext(null, Outcome.OVERSIZE);
    }
  }

  private void releaseHeld() {
    while (!held.isEmpty()) {
      SseItem item = held.poll();
      heldBytes -= item.rawLength();
      if (!abandoning && item instanceof SseEvent event && event.hasData() && event.mayContainUsage()) {
        process(event);
      } else {
        emitRaw(item);
      }
    }
  }

  /**
   * Rewrites one event that may carry usage, with the context usage or the fallback. An unexpected
   * failure here costs only this event's correction: it goes out as it came, and the stream goes on.
   */
  private void process(SseEvent event) {
    try {
      rewrite(event);
    } catch (RuntimeException e) {
      record(Outcome.ERROR, null);
      releaseUsageEvent(event, event.rawArray());
    }
  }

  private void rewrite(SseEvent event) {
    byte[] payload = event.payloadBytes();
    ContextUsage context = resolved.usage();
    JsonUsageRewriter.Result result = rewriter.rewriteEvent(payload, context, shape);
    Outcome applied = context == null ? resolved.fallback() : Outcome.REWRITTEN;
    if (result instanceof JsonUsageRewriter.Rewritten r) {
      if (r.model() != null) {
        model = r.model();
      }
      impossibleAny |= r.impossible();
      record(applied, new ExchangeReport(applied, r.figures(), r.corrected(), r.model()));
      if (r.corrected()) {
        correctedAny = true;
        releaseUsageEvent(event, event.patchedRaw(patches(r.edits())));
        return;
      }
    } else if (context == null) {
      // Left alone without context usage: the worker's own figures, under the fallback's outcome.
      var own = rewriter.inspect(payload, shape);
      if (own != null) {
        record(applied, new ExchangeReport(applied, own, false, null));
      }
    } else if (result instanceof JsonUsageRewriter.Rejected rejected) {
      record(Outcome.of(rejected), null);
    } else if (result instanceof JsonUsageRewriter.NoUsage n && n.model() != null) {
      model = n.model();
    }
    releaseUsageEvent(event, event.rawArray());
  }

  /** Notes the outcome of a usage-bearing event, which is released right after. */
  private void record(Outcome outcome, ExchangeReport report) {
    usageEventsReleased++;
    lastUsageOutcome = outcome;
    lastUsageReport = report;
  }

  private static List<SseEvent.Patch> patches(ByteEdits edits) {
    List<SseEvent.Patch> patches = new ArrayList<>(4);
    for (ByteEdits.Edit edit : edits.sorted()) {
      patches.add(new SseEvent.Patch(edit.start(), edit.end(), edit.text()));
    }
    return patches;
  }

  private void emitRaw(SseItem item) {
    release(item.rawArray());
  }

  /**
   * Releases {@code bytes}, what becomes of an event that may carry usage, unless it is a usage-only
   * event to take out (none of which went out early).
   */
  private void releaseUsageEvent(SseEvent event, byte[] bytes) {
    if (injected != null && !abandoning && alreadyReleased == 0 && injected.remove(event)) {
      return;
    }
    release(bytes);
  }

  private void release(byte[] bytes) {
    int skip = 0;
    if (alreadyReleased > 0) {
      // The start of this item went out early (forwardSafePrefix); those bytes are the same here.
      skip = (int) Math.min(alreadyReleased, bytes.length);
      alreadyReleased -= skip;
    }
    addReady(bytes, skip, bytes.length - skip);
  }

  private void addReady(byte[] bytes, int from, int length) {
    if (length > 0) {
      ready.add(new Slice(bytes, from, length));
      readyBytes += length;
    }
  }
}
