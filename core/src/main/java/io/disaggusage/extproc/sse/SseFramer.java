package io.disaggusage.extproc.sse;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.function.Consumer;

/**
 * Incremental framer for one Server-Sent-Events byte stream.
 *
 * <p>The stream arrives as chunks split at arbitrary bytes ({@link #feed(byte[], int, int)}) followed
 * by {@link #finish()}. The framer emits to its sink, in stream order, one {@link SseItem} per
 * <ul>
 *   <li>complete event ({@link SseEvent}): its lines with their original terminators and the blank
 *       line that ends it;
 *   <li>blank line outside an event ({@link SsePassThrough.Kind#INTER_EVENT});
 *   <li>piece of an oversize event ({@link SsePassThrough.Kind#OVERSIZE}), see below.
 * </ul>
 * The concatenation of all emitted raw bytes always equals the input.
 *
 * <p><b>Lines.</b> A line ends at {@code \r\n}, {@code \n} or a lone {@code \r}, freely mixed. A blank
 * line ends the current event; a blank line with no event in progress is an inter-event item. A
 * UTF-8 byte-order mark at the very start of the stream stays in the first item's raw bytes and is
 * ignored when deciding whether that first line is blank and when parsing its field name.
 *
 * <p><b>Chunk-boundary invariance.</b> For every way of splitting a stream into chunks (including
 * empty and 1-byte chunks) the framer emits the same events and inter-event items, with the same raw
 * bytes; only the pieces of an oversize event depend on the chunking. The one place where the next
 * byte matters is a carriage return, since {@code \r\n} is a single terminator. The rule is:
 * <em>an item is emitted only once its terminator is known to be complete</em>. A terminating blank
 * line that ends in {@code \n}, or in {@code \r} followed by a byte other than {@code \n} in the same
 * chunk, completes the item at once. When the chunk ends right after the {@code \r} of the terminating
 * blank line, the item is held; the next fed byte decides: a {@code \n} becomes the item's last byte,
 * anything else starts the next item; {@link #finish()} emits it as is. So an event that ends with
 * {@code \r\n\r\n} always carries all four bytes, whatever the split, and in a stream using lone CRs
 * an event whose final CR is the last byte of a chunk is emitted with the next chunk (or at finish).
 * A CR that ends a non-blank line at a chunk end needs no special care: the event is not complete
 * yet, and a following {@code \n} in the next chunk joins that line's terminator. Events whose blank
 * line ends in {@code \n} (LF or CRLF framing, what every known engine writes) are therefore always
 * emitted during the feed of the chunk in which they complete.
 *
 * <p><b>Oversize events.</b> An event whose raw size (terminator included) exceeds
 * {@code maxEventBytes} is not framed. As soon as the incomplete event exceeds the cap, the bytes held
 * so far (plus the rest of the current chunk that belongs to the event) are emitted as one oversize
 * piece flagged {@link SsePassThrough#startsOversizeEvent()}; every further byte of the same event is
 * emitted as an oversize piece in the chunk it arrives in, up to and including the event's blank line;
 * then normal framing resumes. An event that is complete within one chunk but exceeds the cap is
 * emitted as a single starting oversize piece. The framer never holds more than
 * {@code maxEventBytes} bytes between calls.
 *
 * <p><b>End of stream.</b> {@link #finish()} emits a held partial event as an {@link SseEvent} with
 * {@link SseEvent#terminated()} false (its last line may lack a terminator), or, when it was only
 * waiting for a possible {@code \n} after its final CR, as a terminated event.
 *
 * <p><b>Cost.</b> Every input byte is scanned for line terminators once, eight at a time ({@link
 * ByteSearch}; a partial event keeps its scan state across chunks, so held bytes are never rescanned)
 * and copied into its item once, plus once into the held buffer when its event spans chunks (that
 * buffer grows by doubling). Pass-through pieces are copied once. {@link #skim} copies only the
 * held bytes. A framer is not thread-safe and not re-entrant: the sink must not call back
 * into it. If the sink throws, the framer must be discarded.
 */
public final class SseFramer {

  /** Smallest accepted {@code maxEventBytes}. */
  public static final int MIN_MAX_EVENT_BYTES = 8;

  private static final byte[] EMPTY = new byte[0];
  private static final byte[] BOM = {(byte) 0xEF, (byte) 0xBB, (byte) 0xBF};
  private static final int SCRATCH_BYTES = 8192;
  /** After an item completes, larger buffers are dropped so an idle stream holds little memory. */
  private static final int KEEP_HELD_CAPACITY = 64 * 1024;

  private static final int KEEP_LINE_CAPACITY = 2 * 1024;

  private final int maxEventBytes;
  private final Consumer<? super SseItem> sink;

  /** Bytes of the current incomplete item (normal mode only); at most {@link #maxEventBytes}. */
  private byte[] held = EMPTY;

  private int heldLength;
  /** Lines of the current item: (content start, content end) pairs, relative to the item start. */
  private int[] lines = new int[16];

  private int lineCount;
  /** Start of the current line relative to the item start (normal mode). */
  private int lineStart;
  /** The previous byte was a CR ending a non-blank line; a following LF belongs to it. */
  private boolean afterCr;
  /** The item's terminating blank line ended with a CR that was the last byte seen. */
  private boolean pendingEnd;
  /** Passing the current event through as oversize pieces. */
  private boolean oversize;
  /** Oversize mode: the first piece of the current oversize event was emitted. */
  private boolean oversizeStarted;
  /** Oversize mode: the current line has content. */
  private boolean lineHasContent;
  /** Stream-initial byte-order mark: 0..2 bytes matched so far, 3 present, -1 absent. */
  private int bom;

  private long bytesFed;
  private long oversizeEvents;
  private boolean finished;
  private boolean busy;
  private byte[] scratch;
  /** False while {@link #skim} runs: completed items are dropped, not built. */
  private boolean delivering = true;
  /** While {@link #skimUntil} runs: the needle it stops at, its search byte, and where it stopped. */
  private byte[] watch;
  private int watchAnchor;
  private int stoppedAt;

  /**
   * @param maxEventBytes largest event (raw bytes, terminator included) that is framed; larger events
   *     are passed through as oversize pieces. At least {@link #MIN_MAX_EVENT_BYTES}.
   * @param sink receives every item, in stream order, during {@link #feed} and {@link #finish}
   */
  public SseFramer(int maxEventBytes, Consumer<? super SseItem> sink) {
    if (maxEventBytes < MIN_MAX_EVENT_BYTES) {
      throw new IllegalArgumentException(
          "maxEventBytes must be at least " + MIN_MAX_EVENT_BYTES + ": " + maxEventBytes);
    }
    this.maxEventBytes = maxEventBytes;
    this.sink = Objects.requireNonNull(sink, "sink");
  }

  /** Frames a complete stream at once: feeds it and finishes. */
  public static List<SseItem> frameAll(byte[] stream, int maxEventBytes) {
    List<SseItem> items = new ArrayList<>();
    SseFramer framer = new SseFramer(maxEventBytes, items::add);
    framer.feed(stream);
    framer.finish();
    return items;
  }

  public int maxEventBytes() {
    return maxEventBytes;
  }

  /** Bytes currently held for an incomplete item (never more than {@link #maxEventBytes()}). */
  public int heldBytes() {
    return heldLength;
  }

  /** Total bytes fed so far. */
  public long bytesFed() {
    return bytesFed;
  }

  /** Number of oversize events seen so far (counted when their first piece is emitted). */
  public long oversizeEventCount() {
    return oversizeEvents;
  }

  /** Whether {@link #finish()} was called. */
  public boolean isFinished() {
    return finished;
  }

  /** Feeds a whole array. */
  public void feed(byte[] chunk) {
    feed(chunk, 0, chunk.length);
  }

  /**
   * Feeds the next {@code length} bytes of the stream. The framer does not keep a reference to
   * {@code chunk} after returning.
   *
   * @throws IllegalStateException after {@link #finish()} or when called from the sink
   */
  public void feed(byte[] chunk, int offset, int length) {
    Objects.checkFromIndexSize(offset, length, chunk.length);
    enter();
    try {
      if (length > 0) {
        scan(chunk, offset, offset + length);
      }
    } finally {
      busy = false;
    }
  }

  /**
   * Frames {@code chunk} exactly like {@link #feed(byte[])} but delivers none of the items that
   * complete in it: for a caller that knows it needs none of them (their bytes go out as they came).
   * Items are neither copied nor built; oversize events are still counted. The incomplete item at
   * the chunk's end is held as by {@code feed}, and is delivered by a later {@code feed} or {@link
   * #finish()} with all its bytes.
   */
  public void skim(byte[] chunk) {
    delivering = false;
    try {
      feed(chunk, 0, chunk.length);
    } finally {
      delivering = true;
    }
  }

  /**
   * {@link #skim} up to the first occurrence of {@code needle} that lies wholly inside {@code chunk},
   * found in the same pass as the line ends (a needle without line-end bytes; the search runs on
   * {@code needle[anchor]}, see {@link ByteSearch#indexOf}). Returns where the needle starts, having
   * framed exactly {@code chunk[0, p)} as {@code skim} would; the caller feeds the rest. Returns
   * {@code chunk.length} when the needle does not occur: the whole chunk was skimmed.
   */
  public int skimUntil(byte[] chunk, byte[] needle, int anchor) {
    delivering = false;
    watch = needle;
    watchAnchor = anchor;
    stoppedAt = -1;
    try {
      feed(chunk, 0, chunk.length);
      return stoppedAt < 0 ? chunk.length : stoppedAt;
    } finally {
      delivering = true;
      watch = null;
    }
  }

  /**
   * Feeds the buffer's remaining bytes and advances its position to its limit. Buffers without an
   * accessible array (direct or read-only) are copied through a small scratch array.
   */
  public void feed(ByteBuffer chunk) {
    if (chunk.hasArray()) {
      int n = chunk.remaining();
      feed(chunk.array(), chunk.arrayOffset() + chunk.position(), n);
      chunk.position(chunk.limit());
      return;
    }
    if (!chunk.hasRemaining()) {
      checkUsable();
      return;
    }
    if (scratch == null) {
      scratch = new byte[SCRATCH_BYTES];
    }
    while (chunk.hasRemaining()) {
      int n = Math.min(chunk.remaining(), scratch.length);
      chunk.get(scratch, 0, n);
      feed(scratch, 0, n);
    }
  }

  /**
   * Signals end of stream and emits whatever is held. Calling it again has no effect.
   *
   * @throws IllegalStateException when called from the sink
   */
  public void finish() {
    if (busy) {
      throw new IllegalStateException("SseFramer is not re-entrant");
    }
    if (finished) {
      return;
    }
    finished = true;
    busy = true;
    try {
      flushAtEnd();
    } finally {
      busy = false;
    }
  }

  private void checkUsable() {
    if (busy) {
      throw new IllegalStateException("SseFramer is not re-entrant");
    }
    if (finished) {
      throw new IllegalStateException("stream already finished");
    }
  }

  private void enter() {
    checkUsable();
    busy = true;
  }

  private void scan(byte[] c, int off, int end) {
    final long chunkPos = bytesFed;
    if (bom >= 0 && bom < 3) {
      for (int i = off; i < end && bom >= 0 && bom < 3; i++) {
        bom = c[i] == BOM[bom] ? bom + 1 : -1;
      }
    }
    bytesFed += end - off;
    // Index (in c) of the current item's first byte; below off when part of it is held.
    int itemStart = off - heldLength;
    int i = off;
    while (i < end) {
      if (pendingEnd) {
        pendingEnd = false;
        int e = c[i] == '\n' ? i + 1 : i;
        completeItem(c, off, itemStart, e);
        itemStart = e;
        i = e;
        continue;
      }
      if (afterCr) {
        afterCr = false;
        if (c[i] == '\n') {
          i++;
          lineStart = i - itemStart;
          continue;
        }
      }
      int j;
      if (watch == null) {
        j = ByteSearch.lineBreak(c, i, end);
      } else {
        j = lineBreakOrWatched(c, off, i, end);
        if (stoppedAt >= 0) {
          // Stop as if the chunk ended where the needle starts: no line end lies in [i, stoppedAt).
          bytesFed -= end - stoppedAt;
          end = stoppedAt;
          j = end;
        }
      }
      if (oversize && j > i && chunkPos + (j - off) > bomEnd()) {
        lineHasContent = true;
      }
      if (j == end) {
        break;
      }
      int termEnd;
      boolean crAtChunkEnd = false;
      if (c[j] == '\r') {
        if (j + 1 < end) {
          termEnd = c[j + 1] == '\n' ? j + 2 : j + 1;
        } else {
          termEnd = end;
          crAtChunkEnd = true;
        }
      } else {
        termEnd = j + 1;
      }
      boolean blank;
      if (oversize) {
        blank = !lineHasContent;
        lineHasContent = false;
      } else {
        int cs = contentStart(chunkPos, off, itemStart);
        int ce = j - itemStart;
        blank = cs == ce;
        if (!blank) {
          addLine(cs, ce);
        }
      }
      i = termEnd;
      if (blank) {
        if (!crAtChunkEnd) {
          completeItem(c, off, itemStart, termEnd);
          itemStart = termEnd;
          continue;
        }
        pendingEnd = true;
      } else {
        afterCr = crAtChunkEnd;
        lineStart = termEnd - itemStart;
      }
      if (!oversize && termEnd - itemStart > maxEventBytes) {
        enterOversize(chunkPos, off, itemStart, termEnd);
      }
    }
    // End of chunk: everything from itemStart belongs to the current, incomplete item.
    if (!oversize && end - itemStart > maxEventBytes) {
      enterOversize(chunkPos, off, itemStart, end);
    }
    if (oversize) {
      emitOversizePiece(c, off, itemStart, end);
    } else {
      hold(c, off, itemStart, end);
    }
  }

  /**
   * The first line end in {@code c[i, end)} ({@code end} when none), unless the watched needle starts
   * before it, wholly inside {@code c[off, end)}: then {@link #stoppedAt} is set to its start.
   */
  private int lineBreakOrWatched(byte[] c, int off, int i, int end) {
    byte anchorByte = watch[watchAnchor];
    int j = i;
    while (true) {
      j = ByteSearch.lineBreakOr(c, j, end, anchorByte);
      if (j == end || c[j] == '\n' || c[j] == '\r') {
        return j;
      }
      int start = j - watchAnchor;
      if (start >= off && start + watch.length <= end && ByteSearch.matchesAt(c, start, watch)) {
        stoppedAt = start;
        return j;
      }
      j++;
    }
  }

  /** End of the stream-initial byte-order mark (0 when there is none). */
  private long bomEnd() {
    return bom == 3 ? BOM.length : 0;
  }

  /** Content start of the current line relative to the item start, skipping a stream-initial BOM. */
  private int contentStart(long chunkPos, int off, int itemStart) {
    long itemPos = chunkPos + (itemStart - off);
    long bomRel = bomEnd() - itemPos;
    return bomRel > lineStart ? (int) bomRel : lineStart;
  }

  private void addLine(int contentStart, int contentEnd) {
    if (2 * lineCount + 2 > lines.length) {
      lines = Arrays.copyOf(lines, lines.length * 2);
    }
    lines[2 * lineCount] = contentStart;
    lines[2 * lineCount + 1] = contentEnd;
    lineCount++;
  }

  /** Switches the current item, which has {@code at - itemStart} bytes so far, to oversize mode. */
  private void enterOversize(long chunkPos, int off, int itemStart, int at) {
    oversize = true;
    oversizeStarted = false;
    lineCount = 0;
    lineHasContent = !pendingEnd && !afterCr && at - itemStart > contentStart(chunkPos, off, itemStart);
  }

  /** Copies the item bytes {@code [itemStart, e)} of the current chunk, held bytes first. */
  private byte[] copyItem(byte[] c, int off, int itemStart, int e) {
    byte[] raw = new byte[e - itemStart];
    int fromHeld = off - itemStart;
    if (fromHeld > 0) {
      System.arraycopy(held, 0, raw, 0, fromHeld);
      System.arraycopy(c, off, raw, fromHeld, e - off);
    } else {
      System.arraycopy(c, itemStart, raw, 0, e - itemStart);
    }
    return raw;
  }

  /** The current item ends just before {@code e} (its terminating blank line included). */
  private void completeItem(byte[] c, int off, int itemStart, int e) {
    if (oversize) {
      emitOversizePiece(c, off, itemStart, e);
      oversize = false;
    } else if (!delivering) {
      if (e - itemStart > maxEventBytes) {
        oversizeEvents++;
      }
    } else {
      byte[] raw = copyItem(c, off, itemStart, e);
      if (raw.length > maxEventBytes) {
        oversizeEvents++;
        sink.accept(new SsePassThrough(raw, SsePassThrough.Kind.OVERSIZE, true));
      } else if (lineCount == 0) {
        sink.accept(new SsePassThrough(raw, SsePassThrough.Kind.INTER_EVENT, false));
      } else {
        sink.accept(new SseEvent(raw, lines, lineCount, true));
      }
    }
    resetItem();
  }

  private void resetItem() {
    heldLength = 0;
    if (held.length > KEEP_HELD_CAPACITY) {
      held = EMPTY;
    }
    if (lines.length > KEEP_LINE_CAPACITY) {
      lines = new int[16];
    }
    lineCount = 0;
    lineStart = 0;
    afterCr = false;
    lineHasContent = false;
    oversizeStarted = false;
  }

  private void emitOversizePiece(byte[] c, int off, int itemStart, int e) {
    if (e > itemStart) {
      boolean first = !oversizeStarted;
      if (first) {
        oversizeEvents++;
        oversizeStarted = true;
      }
      if (delivering) {
        sink.accept(new SsePassThrough(copyItem(c, off, itemStart, e), SsePassThrough.Kind.OVERSIZE, first));
      }
    }
    heldLength = 0;
  }

  /** Keeps the incomplete item's bytes {@code [itemStart, end)} (at most maxEventBytes) for later. */
  private void hold(byte[] c, int off, int itemStart, int end) {
    int n = end - itemStart;
    if (n > held.length) {
      int cap = Math.max(n, Math.min(maxEventBytes, Math.max(256, 2 * held.length)));
      held = Arrays.copyOf(held, cap);
    }
    int from = Math.max(itemStart, off);
    int dst = from - itemStart; // bytes already held
    System.arraycopy(c, from, held, dst, end - from);
    heldLength = n;
  }

  private void flushAtEnd() {
    if (oversize) {
      // Everything was passed through already; an oversize event cut by the end stays cut.
      oversize = false;
      pendingEnd = false;
      resetItem();
      return;
    }
    if (heldLength == 0) {
      return;
    }
    boolean terminated = pendingEnd;
    if (!pendingEnd && !afterCr) {
      int cs = contentStart(bytesFed, 0, -heldLength);
      if (heldLength > cs) {
        addLine(cs, heldLength);
      }
    }
    pendingEnd = false;
    byte[] raw = Arrays.copyOf(held, heldLength);
    if (lineCount == 0) {
      sink.accept(new SsePassThrough(raw, SsePassThrough.Kind.INTER_EVENT, false));
    } else {
      sink.accept(new SseEvent(raw, lines, lineCount, terminated));
    }
    resetItem();
  }
}
