package io.disaggusage.extproc.edge;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.async.ByteArrayFeeder;
import com.fasterxml.jackson.core.exc.StreamConstraintsException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Takes members out of one JSON request body as it streams, chunk by chunk, and leaves every other
 * byte as it came: the output is the input without each removed member and one comma next to it
 * (with the blanks between them), so it is still one JSON object, with the client's key order,
 * whitespace, number spelling and escapes. Which members: the {@link MemberPaths}, wherever they
 * occur — every duplicate too (Python's {@code json} keeps the last one), names compared decoded
 * (a name whose underscore is written as a {@code \}{@code u005f} escape is still {@code
 * kv_transfer_params}).
 *
 * <p>Jackson's non-blocking parser reads the body; the remover places its token ends on the bytes.
 * Held back, undecided, is only what lies between a member and the next name (the comma may have to
 * go) inside the few objects that may hold removed members, at most {@link
 * MemberRemoval.Limits#maxHeldBytes()} of it; everything else goes out in the reply to the chunk it
 * came in. The output is the same for every chunking of a body.
 *
 * <p>A body that is not one JSON object — malformed, truncated, too deep, a root that is not an object,
 * anything but whitespace after it, a UTF-8 byte-order mark anywhere but at the start — is {@link
 * #rejection() rejected}: the caller must not forward it, since an engine's parser could read members
 * in it that this one did not see. What Python's {@code json} reads and Jackson does not by default
 * ({@code NaN}, {@code Infinity}, {@code -Infinity}, a leading byte-order mark) is read.
 *
 * <p>Not thread-safe: one instance per body. The chunk arrays are not written to, and not kept after
 * {@link #accept} returns.
 */
public final class MemberRemover {
  private static final byte[] EMPTY = new byte[0];
  private static final byte[] BOM = {(byte) 0xEF, (byte) 0xBB, (byte) 0xBF};

  private enum State {
    BEFORE_ROOT,
    IN_ROOT,
    AFTER_ROOT,
    REJECTED
  }

  /** An open object that may hold removed members (the root, and those the paths go through). */
  private static final class Frame {
    final int depth;
    final MemberPaths.Node node;
    /** A member of this object has gone out: a removed one after it takes the comma before it. */
    boolean kept;
    /** A member was removed with no kept member before it: it takes the comma after it. */
    boolean removedFirst;

    Frame(int depth, MemberPaths.Node node) {
      this.depth = depth;
      this.node = node;
    }
  }

  private final JsonParser parser;
  private final ByteArrayFeeder feeder;
  private final MemberPaths.Node root;
  private final int maxHeldBytes;
  private final int maxStringChars;

  private State state = State.BEFORE_ROOT;
  private boolean ended;
  private Rejection rejection;
  private final Map<String, Integer> removed = new LinkedHashMap<>(4);

  // Structure. Frames nest only along the paths: a few at most.
  private Frame[] frames = new Frame[4];
  private int frameCount;
  /** The level below the kept member just named, for its value if that is an object; or null. */
  private MemberPaths.Node pendingChild;
  /** Depth of the object whose member's value is being dropped; -1 when none is. */
  private int removingDepth = -1;

  // Bytes, at absolute offsets into the body.
  /** Offset of the chunk being read. */
  private long base;
  private byte[] chunk;
  /** Bytes before this offset have gone out or been dropped. */
  private long decided;
  /** Bytes from {@link #decided} on are held back until the next name or the object's end. */
  private boolean holding;
  /** Held bytes of earlier chunks: {@code [heldFrom, base)}. */
  private byte[] held = EMPTY;
  private long heldFrom;
  /** BOM bytes matched at the start; the parser's offset 0 is after them. */
  private int bomMatched;
  /** The last byte of the chunks before this one that is not whitespace. */
  private byte lastNonWhitespace;
  /** Whether the parser has had input. */
  private boolean fed;
  private final Output out = new Output();

  MemberRemover(JsonFactory json, MemberPaths.Node root, MemberRemoval.Limits limits) {
    try {
      this.parser = json.createNonBlockingByteArrayParser();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    this.feeder = (ByteArrayFeeder) parser.getNonBlockingInputFeeder();
    this.root = root;
    this.maxHeldBytes = limits.maxHeldBytes();
    this.maxStringChars = limits.maxStringBytes();
  }

  /**
   * Reads one chunk and returns the bytes to forward for it: {@code chunk} itself when they are
   * exactly its bytes, otherwise new bytes (possibly empty while some are held back). With {@code
   * end} (the body's last chunk), nothing stays held and the verdict is final. Once the body is
   * {@link #rejection() rejected}, returns nothing more.
   */
  public byte[] accept(byte[] chunk, boolean end) {
    if (ended) {
      throw new IllegalStateException("the body has ended");
    }
    ended = end;
    if (state == State.REJECTED) {
      return EMPTY;
    }
    this.chunk = chunk;
    out.begin(chunk);
    boolean finishing = false;
    try {
      read(chunk);
      if (end && state != State.REJECTED && state != State.AFTER_ROOT) {
        finishing = true;
        finish();
      }
    } catch (StreamConstraintsException e) {
      reject(parser.getParsingContext().getNestingDepth() >= depthLimit() ? Rejection.TOO_DEEP : Rejection.TOO_LARGE);
    } catch (IOException e) {
      reject(finishing ? Rejection.TRUNCATED : Rejection.MALFORMED);
    }
    long chunkEnd = base + chunk.length;
    if (state != State.REJECTED) {
      settle(chunkEnd);
      for (int i = chunk.length - 1; i >= 0; i--) {
        if (!whitespace(chunk[i])) {
          lastNonWhitespace = chunk[i];
          break;
        }
      }
    }
    base = chunkEnd;
    this.chunk = null;
    if (state == State.REJECTED) {
      return EMPTY;
    }
    if (end) {
      close();
    }
    return out.result();
  }

  /** Why the body cannot be forwarded; null while it may be (and, after the end, when it may). */
  public Rejection rejection() {
    return rejection;
  }

  /** Whether the body ended as one JSON object: the output is complete and valid. */
  public boolean complete() {
    return ended && state == State.AFTER_ROOT;
  }

  /** Members removed so far, by dotted path, in the order first seen. */
  public Map<String, Integer> removed() {
    return Collections.unmodifiableMap(removed);
  }

  // ---------------------------------------------------------------------------------------------
  // Reading

  private void read(byte[] chunk) throws IOException {
    int from = 0;
    if (state == State.BEFORE_ROOT && bomMatched < BOM.length && base == bomMatched) {
      from = matchBom(chunk);
      if (state == State.REJECTED) {
        return;
      }
    }
    if (state == State.AFTER_ROOT) {
      checkTrailing(from);
      return;
    }
    if (from < chunk.length) {
      if (!fed && chunk[from] == BOM[0]) {
        // A second mark: Python's utf-8-sig takes off one. Jackson would take this one off too.
        reject(Rejection.MALFORMED);
        return;
      }
      fed = true;
      feeder.feedInput(chunk, from, chunk.length);
      drain();
    }
  }

  /**
   * Matches a UTF-8 byte-order mark at the body's start (Python reads bytes as {@code utf-8-sig}); it
   * is never given to the parser, whose offsets then start after it. Returns where the parser's input
   * starts in {@code chunk}.
   */
  private int matchBom(byte[] chunk) {
    int i = 0;
    while (i < chunk.length && bomMatched < BOM.length) {
      if (chunk[i] != BOM[bomMatched]) {
        if (bomMatched > 0) {
          reject(Rejection.MALFORMED); // a part of a mark, then something else
        }
        bomMatched = BOM.length + 1; // no mark: the parser starts at offset 0
        return i;
      }
      bomMatched++;
      i++;
    }
    return i;
  }

  /** The body ended: the parser is told, and what it still had decides. */
  private void finish() throws IOException {
    if (bomMatched > 0 && bomMatched < BOM.length) {
      reject(Rejection.TRUNCATED);
      return;
    }
    feeder.endOfInput();
    drain();
    if (state == State.BEFORE_ROOT || state == State.IN_ROOT) {
      reject(Rejection.TRUNCATED);
    }
  }

  private void drain() throws IOException {
    while (state == State.BEFORE_ROOT || state == State.IN_ROOT) {
      JsonToken token = parser.nextToken();
      if (token == JsonToken.NOT_AVAILABLE || token == null) {
        return;
      }
      if (token == JsonToken.VALUE_STRING && parser.getTextLength() > maxStringChars) {
        // Jackson checks the limit only when its buffer grows, and a recycled buffer may be larger.
        reject(Rejection.TOO_LARGE);
        return;
      }
      onToken(token, position(), parser.getParsingContext().getNestingDepth());
    }
    if (state == State.AFTER_ROOT) {
      checkTrailing((int) (position() - base));
    }
  }

  /** The absolute offset just past the token the parser returned last. */
  private long position() {
    long origin = bomMatched == BOM.length ? BOM.length : 0;
    return origin + parser.currentLocation().getByteOffset();
  }

  /**
   * One token, ending before {@code pos}; {@code depth} is the nesting after it (a member's value at
   * the depth of its object).
   */
  private void onToken(JsonToken token, long pos, int depth) throws IOException {
    if (state == State.BEFORE_ROOT) {
      if (token != JsonToken.START_OBJECT) {
        reject(Rejection.NOT_AN_OBJECT);
        return;
      }
      state = State.IN_ROOT;
      emit(pos);
      push(depth, root);
      return;
    }
    if (token == JsonToken.END_OBJECT && afterComma(pos - 1)) {
      reject(Rejection.MALFORMED); // {"a":1,} cut after the comma: Jackson 2.21's parser takes it
      return;
    }
    if (removingDepth >= 0) {
      if (depth == removingDepth && endsValue(token)) {
        drop(pos); // the removed member's value ended
        removingDepth = -1;
        holding = true;
      }
      return;
    }
    Frame top = frames[frameCount - 1];
    switch (token) {
      case FIELD_NAME -> {
        if (depth == top.depth) {
          name(top, parser.currentName(), pos);
        }
      }
      case START_OBJECT, START_ARRAY -> {
        if (pendingChild != null && token == JsonToken.START_OBJECT) {
          emit(pos);
          push(depth, pendingChild);
        }
        pendingChild = null;
      }
      default -> {
        pendingChild = null;
        if (token == JsonToken.END_OBJECT && depth == top.depth - 1) {
          closeObject(pos, depth);
        } else if (depth == top.depth) {
          emit(pos); // a kept member's value ended: what follows is held until the next name
          holding = true;
        }
      }
    }
  }

  private static boolean endsValue(JsonToken token) {
    return token.isScalarValue() || token == JsonToken.END_OBJECT || token == JsonToken.END_ARRAY;
  }

  /**
   * A member name of an object that may hold removed members ended before {@code pos}. Held are the
   * bytes since the previous member's value (or the opening brace): blanks, its comma, blanks and
   * this name.
   */
  private void name(Frame frame, String name, long pos) {
    if (!withinHoldCap(pos)) {
      return;
    }
    long quote = find((byte) '"', decided);
    String path = frame.node.removedPath(name);
    if (path == null) {
      if (frame.removedFirst && !frame.kept) {
        drop(quote); // the comma after the removed members before it
      }
      emit(pos);
      frame.kept = true;
      holding = false;
      pendingChild = frame.node.child(name);
      return;
    }
    removed.merge(path, 1, Integer::sum);
    if (frame.kept) {
      emit(find((byte) ',', decided)); // blanks before the comma stay; the comma goes with the member
    } else if (!frame.removedFirst) {
      emit(quote); // blanks after the opening brace stay; the comma after the member goes with it
      frame.removedFirst = true;
    }
    drop(pos);
    holding = false;
    removingDepth = frame.depth;
  }

  /** An object that may hold removed members closed before {@code pos}; {@code depth} is its parent's. */
  private void closeObject(long pos, int depth) {
    if (!withinHoldCap(pos)) {
      return;
    }
    emit(pos); // blanks and the closing brace
    frameCount--;
    if (depth == 0) {
      state = State.AFTER_ROOT;
      holding = false;
    } else {
      holding = true; // it was the value of a member of the object below it on the stack
    }
  }

  /** Whether the last byte before {@code pos} that is not whitespace is a comma. */
  private boolean afterComma(long pos) {
    for (long i = pos - 1; i >= base; i--) {
      byte b = chunk[(int) (i - base)];
      if (!whitespace(b)) {
        return b == ',';
      }
    }
    return lastNonWhitespace == ',';
  }

  private static boolean whitespace(byte b) {
    return b == ' ' || b == '\t' || b == '\n' || b == '\r';
  }

  /** After the root object only whitespace may come: checks the chunk from {@code from} on. */
  private void checkTrailing(int from) {
    for (int i = from; i < chunk.length; i++) {
      if (!whitespace(chunk[i])) {
        reject(Rejection.MALFORMED);
        return;
      }
    }
  }

  private void push(int depth, MemberPaths.Node node) {
    if (frameCount == frames.length) {
      frames = Arrays.copyOf(frames, frameCount * 2);
    }
    frames[frameCount++] = new Frame(depth, node);
    holding = true;
  }

  private int depthLimit() {
    return parser.streamReadConstraints().getMaxNestingDepth();
  }

  private void reject(Rejection why) {
    if (state != State.REJECTED) {
      state = State.REJECTED;
      rejection = why;
      close();
    }
  }

  private void close() {
    held = EMPTY;
    try {
      parser.close();
    } catch (IOException e) {
      throw new UncheckedIOException(e); // a non-blocking parser closes no stream
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Bytes

  /** False (and rejected) when the held run up to {@code pos} is longer than the cap. */
  private boolean withinHoldCap(long pos) {
    if (holding && pos - decided > maxHeldBytes) {
      reject(Rejection.TOO_LARGE);
      return false;
    }
    return true;
  }

  /** The chunk has been read: what is not held or being dropped goes out; what is held is kept. */
  private void settle(long chunkEnd) {
    if (removingDepth >= 0) {
      drop(chunkEnd);
    } else if (!holding || state == State.AFTER_ROOT) {
      emit(chunkEnd);
    } else if (withinHoldCap(chunkEnd)) {
      keepHeld(chunkEnd);
    }
  }

  /** Copies the held run into {@link #held}, which the next chunk continues. */
  private void keepHeld(long chunkEnd) {
    int length = (int) (chunkEnd - decided);
    byte[] kept = new byte[length];
    int fromHeld = (int) Math.max(0, Math.min(base, chunkEnd) - decided);
    if (fromHeld > 0) {
      System.arraycopy(held, (int) (decided - heldFrom), kept, 0, fromHeld);
    }
    System.arraycopy(chunk, (int) (decided + fromHeld - base), kept, fromHeld, length - fromHeld);
    held = kept;
    heldFrom = decided;
  }

  private byte byteAt(long pos) {
    return pos < base ? held[(int) (pos - heldFrom)] : chunk[(int) (pos - base)];
  }

  /** The offset of the first {@code b} at or after {@code from} (the parser has seen it there). */
  private long find(byte b, long from) {
    long pos = from;
    while (byteAt(pos) != b) {
      pos++;
    }
    return pos;
  }

  /** The bytes from {@link #decided} to {@code to} go out. */
  private void emit(long to) {
    if (decided < base) {
      long heldEnd = Math.min(to, base);
      out.add(held, (int) (decided - heldFrom), (int) (heldEnd - decided));
      decided = heldEnd;
    }
    if (decided < to) {
      out.add(chunk, (int) (decided - base), (int) (to - decided));
      decided = to;
    }
    forgetHeld();
  }

  /** The bytes from {@link #decided} to {@code to} are dropped. */
  private void drop(long to) {
    decided = to;
    forgetHeld();
  }

  private void forgetHeld() {
    if (decided >= base) {
      held = EMPTY;
    }
  }

  /** The bytes of one reply: the chunk itself while they are exactly it, else a copy. */
  private static final class Output {
    private byte[] chunk;
    private byte[] bytes = EMPTY;
    private int length;
    /** The output so far is {@code chunk[0, length)} itself. */
    private boolean whole;

    void begin(byte[] chunk) {
      this.chunk = chunk;
      this.bytes = EMPTY;
      this.length = 0;
      this.whole = true;
    }

    void add(byte[] from, int offset, int count) {
      if (count == 0) {
        return;
      }
      if (whole && from == chunk && offset == length) {
        length += count;
        return;
      }
      if (whole) {
        whole = false;
        bytes = Arrays.copyOf(chunk, Math.max(length + count, Math.min(chunk.length, 1 << 16)));
      }
      if (length + count > bytes.length) {
        bytes = Arrays.copyOf(bytes, Math.max(length + count, bytes.length * 2));
      }
      System.arraycopy(from, offset, bytes, length, count);
      length += count;
    }

    byte[] result() {
      if (whole) {
        return length == chunk.length ? chunk : Arrays.copyOf(chunk, length);
      }
      return length == bytes.length ? bytes : Arrays.copyOf(bytes, length);
    }
  }
}
