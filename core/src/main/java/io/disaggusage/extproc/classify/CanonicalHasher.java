package io.disaggusage.extproc.classify;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.security.DigestException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;

/**
 * A SHA-256 digest of one JSON (or MessagePack) value's canonical encoding, fed the value's events as
 * a reader streams them. Two spellings of one value have one encoding ({@code enc}), and the encoding
 * of two different values differs (up to a SHA-256 collision, and for the lane sums below, a
 * multiset-sum collision):
 *
 * <ul>
 *   <li>strings: {@code 's' uvarint(n) bytes}, the n UTF-8 bytes after unescaping ({@code "\u0041"}
 *       is {@code "A"}). A lone surrogate (JSON only) is encoded as its three-byte form, so it matches
 *       nothing valid. Member names: the same with {@code 'k'}.
 *   <li>numbers, by value: an int64 is {@code 'i' uvarint(zigzag(v))}; a larger integer is exact, {@code
 *       'I' uvarint(n)} and its n-byte minimal two's complement; a number with a fraction or exponent
 *       (and a MessagePack float) is the nearest double, because every producer on the way (Python,
 *       Go, msgspec) holds it as one, {@code 'd'} and its eight IEEE bytes; a double that is a whole
 *       number is that integer, so {@code 1}, {@code 1.0}, {@code 1e0} and {@code -0.0 = 0} agree; a
 *       float32 is the double of exactly its value.
 *   <li>{@code true}, {@code false}, {@code null}: {@code 't'}, {@code 'f'}, {@code 'n'}; whitespace is
 *       not an event. MessagePack bin: {@code 'b' uvarint(n) bytes}; ext: {@code 'x' uvarint(n) type
 *       bytes} (JSON cannot express them).
 *   <li>arrays: {@code 'A'}, the elements' encodings in order, {@code ']'}.
 *   <li>objects, order-independent (llm-d's pd-sidecar re-serialises bodies with sorted keys). A
 *       member's representation is {@code part(enc_k(name)) part(enc(value))}, where {@code part(e)}
 *       is {@code e} itself when it is at most {@value #INLINE_MAX} bytes and {@code 'H' SHA-256(e)}
 *       otherwise. An object nested in fewer than {@value #SORT_MAX_DEPTH} objects of the hashed value
 *       (its depth is where it sits in the value, the same in every spelling) with at most {@value
 *       #SORT_MAX_MEMBERS} members whose representations total at most {@value #SORT_MAX_BYTES}
 *       bytes is {@code 'O'}, the representations sorted bytewise (unsigned), {@code '}'}. A larger one
 *       is {@code 'L' uvarint(count) lanes}: the members' {@code SHA-256(representation)} added as four
 *       big-endian 64-bit lanes, each mod 2^64. A deeper object is {@code 'D' uvarint(count) lanes}
 *       over {@code SHA-256(enc_k(name) enc(value))}. A duplicated name counts as two members, as
 *       written. Which form an object takes depends on its own content and depth only, never on its
 *       members' order.
 * </ul>
 *
 * Every encoding starts with a tag byte and is self-delimiting, so a sequence of them decodes one way.
 *
 * <p>Strength: every form reduces to SHA-256's collision resistance except the lane sums, additive
 * multiset hashes: for an object of m members a generalised-birthday search for another m-member
 * object with the same sum costs about 2^(256 / (1 + log2 m)). Objects within the sorted form's
 * bounds (every object a chat, Responses or Messages prompt normally holds) never use them.
 *
 * <p>Memory, whatever the body's size: a {@value #ROOT_STAGE}-byte staging buffer for the value's
 * digest; per open object one buffer of at most {@value #SORT_MAX_BYTES} + 2 × {@value #INLINE_MAX}
 * bytes when it is nested in fewer than {@value #SORT_MAX_DEPTH} objects (grown as its content needs),
 * or one digest state when it is deeper; the encodings of {@value #NAME_SLOTS} short member names.
 * No string is held beyond {@value #INLINE_MAX} bytes.
 *
 * <p>Cost: one SHA-256 update per {@value #ROOT_STAGE} staged bytes or per long string chunk, one
 * finalisation per name or member value longer than {@value #INLINE_MAX} bytes, and per member of an
 * object in lane form; no allocation per value.
 */
final class CanonicalHasher {
  private static final byte NAME = 'k';
  private static final byte STRING = 's';
  private static final byte INT64 = 'i';
  private static final byte BIG_INTEGER = 'I';
  private static final byte DOUBLE = 'd';
  private static final byte TRUE = 't';
  private static final byte FALSE = 'f';
  private static final byte NULL = 'n';
  private static final byte BINARY = 'b';
  private static final byte EXTENSION = 'x';
  private static final byte ARRAY = 'A';
  private static final byte ARRAY_END = ']';
  private static final byte OBJECT = 'O';
  private static final byte OBJECT_END = '}';
  private static final byte LANE_OBJECT = 'L';
  private static final byte DEEP_OBJECT = 'D';
  private static final byte HASHED = 'H';

  static final int DIGEST_BYTES = 32;
  /** The longest name or member value encoding kept as itself in a member's representation. */
  static final int INLINE_MAX = 128;
  /** An object with more members takes the lane form. */
  static final int SORT_MAX_MEMBERS = 64;
  /** An object whose members' representations total more bytes takes the lane form. */
  static final int SORT_MAX_BYTES = 4096;
  /** Objects nested in this many objects of the hashed value (or more) take the deep form. */
  static final int SORT_MAX_DEPTH = 8;
  /** Bytes staged before they go into the value's digest. */
  static final int ROOT_STAGE = 1024;

  private static final int LANES = DIGEST_BYTES / Long.BYTES;
  private static final int SCRATCH = 512;
  /** Room before a short string's bytes for its header: the tag and a length below 2^14. */
  private static final int HEADER_ROOM = 3;
  /** A string of at most this many chars is encoded in one pass, in the scratch buffer. */
  private static final int SHORT_CHARS = (SCRATCH - HEADER_ROOM - 4) / 3;
  /** Member names of at most this many chars are kept encoded, in this many slots. */
  private static final int CACHED_NAME_CHARS = 32;
  static final int NAME_SLOTS = 16;
  /** 2^63 as a double: the first whole double that is no longer an int64. */
  private static final double TWO_TO_63 = 0x1p63;
  private static final VarHandle LONG_BE =
      MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);
  private static final MessageDigest PROTOTYPE = newSha256();

  /** How a {@link Frame} takes its bytes. */
  private enum Form {
    /** The value's own encoding, staged and digested. */
    ROOT,
    /** An object's members buffered whole, to be sorted. */
    SORTED,
    /** An object whose members are each buffered, then digested into the lanes. */
    LANES,
    /** An object whose members stream into a digest, then the lanes: nothing buffered. */
    DEEP
  }

  /**
   * Where bytes go: the root value or one open object. Bytes are written into the current part (a
   * member's name or value, or the root value), {@code buf[partStart, len)}; a part longer than
   * {@code partLimit} spills: what it has so far, and from then on each full stage, goes into {@code
   * digest}.
   */
  private static final class Frame {
    Form form;
    byte[] buf;
    int len;
    int partStart;
    int partLimit;
    boolean spilled;
    MessageDigest digest;
    final long[] lanes = new long[LANES];
    long members;
    boolean expectingName;
    /** SORTED: where each buffered member starts ({@code starts[0]} is 0); {@code starts[members]} is where the next one does. */
    int[] starts;
    int[] order;

    void write(byte b) {
      if (staged(1)) {
        buf[len++] = b;
      } else {
        digest.update(b);
      }
    }

    void write(byte[] b, int off, int n) {
      if (staged(n)) {
        System.arraycopy(b, off, buf, len, n);
        len += n;
      } else {
        digest.update(b, off, n);
      }
    }

    /** Consumes {@code b}'s remaining bytes. */
    void write(ByteBuffer b) {
      int n = b.remaining();
      if (staged(n)) {
        b.get(buf, len, n);
        len += n;
      } else {
        digest.update(b);
      }
    }

    /**
     * Makes room for {@code n} more bytes in the part's stage, spilling it if they do not fit; false
     * when they go straight into the digest (a deep object's, or past a spill, more than a stage).
     */
    private boolean staged(int n) {
      if (form == Form.DEEP) {
        return false;
      }
      if (len - partStart + n > partLimit) {
        spill();
        if (n > partLimit) {
          return false;
        }
      }
      ensure(len + n);
      return true;
    }

    /** The part's staged bytes go into its digest (started now if the part had not spilled). */
    void spill() {
      if (!spilled) {
        spilled = true;
        if (digest == null) {
          digest = sha256();
        }
        digest.reset();
      }
      digest.update(buf, partStart, len - partStart);
      len = partStart;
    }

    void startPart() {
      partStart = len;
      spilled = false;
    }

    /** The part is complete: a spilled part becomes {@code 'H'} and its digest. */
    void endPart() {
      if (spilled) {
        spill();
        ensure(len + 1 + DIGEST_BYTES);
        buf[len] = HASHED;
        finish(digest, buf, len + 1);
        len += 1 + DIGEST_BYTES;
      }
    }

    void ensure(int capacity) {
      if (capacity > buf.length) {
        buf = Arrays.copyOf(buf, Math.max(capacity, Math.min(2 * buf.length, capacityLimit())));
      }
    }

    /** What a buffer can need (a sanity bound: the forms never write more). */
    private int capacityLimit() {
      return form == Form.ROOT ? ROOT_STAGE : SORT_MAX_BYTES + 2 * INLINE_MAX;
    }

    void addLanes(byte[] digest, int off) {
      for (int i = 0; i < LANES; i++) {
        lanes[i] += (long) LONG_BE.get(digest, off + i * Long.BYTES);
      }
    }
  }

  /** Frame 0 is the root; frame k the k-th open object, innermost last. */
  private Frame[] frames = new Frame[4];
  private int objects;
  /** Whether each open container is an object, outermost first. */
  private boolean[] containerIsObject = new boolean[8];
  private int containers;
  /** The string being streamed is a member name. */
  private boolean streamingName;
  /** A high surrogate that ended the last piece of a string streamed as UTF-16; 0 when none. */
  private char pendingHigh;
  /** Finalises one-shot digests: a member's representation, the root. */
  private MessageDigest finisher;
  private final byte[] scratch = new byte[SCRATCH];
  private final char[] chars = new char[CACHED_NAME_CHARS];
  /** Where the last {@link #encodeShort} ended in {@code scratch}. */
  private int scratchEnd;
  /** The short names seen last, by hash, each with its encoding: see {@link #string(String)}. */
  private final String[] names = new String[NAME_SLOTS];
  private final byte[][] nameEncodings = new byte[NAME_SLOTS][];
  private final int[] nameLengths = new int[NAME_SLOTS];
  private final byte[] member = new byte[DIGEST_BYTES];
  private byte[] result;

  /** Forgets everything: the next event starts a new value. */
  void reset() {
    Frame root = frames[0];
    if (root == null) {
      root = frames[0] = new Frame();
      root.form = Form.ROOT;
      root.buf = new byte[256]; // grown up to ROOT_STAGE as values need
      root.partLimit = ROOT_STAGE;
    }
    root.len = 0;
    root.startPart();
    objects = 0;
    containers = 0;
    streamingName = false;
    pendingHigh = 0;
    result = null;
  }

  /** The value is complete; {@link #digest()} is its digest. */
  boolean complete() {
    return result != null;
  }

  /** The 32-byte digest of the completed value. */
  byte[] digest() {
    return result;
  }

  /** A SHA-256 state no value uses now (the root's, between values); null before the first value. */
  MessageDigest idleDigest() {
    return complete() && frames[0] != null ? frames[0].digest : null;
  }

  void startContainer(boolean object) {
    if (containers == containerIsObject.length) {
      containerIsObject = Arrays.copyOf(containerIsObject, containers * 2);
    }
    containerIsObject[containers++] = object;
    if (!object) {
      top().write(ARRAY);
      return;
    }
    if (++objects == frames.length) {
      frames = Arrays.copyOf(frames, objects * 2);
    }
    Frame f = frames[objects];
    if (f == null) {
      f = frames[objects] = new Frame();
    }
    f.form = objects <= SORT_MAX_DEPTH ? Form.SORTED : Form.DEEP;
    if (f.form == Form.DEEP) {
      if (f.digest == null) {
        f.digest = sha256();
      }
    } else {
      if (f.buf == null) {
        f.buf = new byte[256];
        f.starts = new int[8]; // grown up to SORT_MAX_MEMBERS + 2 as members come
        f.order = new int[8];
      }
      f.partLimit = INLINE_MAX;
    }
    f.len = 0;
    f.members = 0;
    if (f.form == Form.DEEP) {
      Arrays.fill(f.lanes, 0);
    }
    f.expectingName = true;
  }

  void endContainer() {
    if (!containerIsObject[--containers]) {
      top().write(ARRAY_END);
      valueDone();
      return;
    }
    Frame f = frames[objects--];
    Frame out = top();
    if (f.form == Form.SORTED) {
      out.write(OBJECT);
      int[] order = f.order;
      int n = (int) f.members;
      for (int i = 0; i < n; i++) {
        order[i] = i;
      }
      sort(f.buf, f.starts, order, n);
      for (int i = 0; i < n; i++) {
        int m = order[i];
        out.write(f.buf, f.starts[m], f.starts[m + 1] - f.starts[m]);
      }
      out.write(OBJECT_END);
    } else {
      int k = 0;
      scratch[k++] = f.form == Form.LANES ? LANE_OBJECT : DEEP_OBJECT;
      k = putVarint(scratch, k, f.members);
      for (long lane : f.lanes) {
        LONG_BE.set(scratch, k, lane);
        k += Long.BYTES;
      }
      out.write(scratch, 0, k);
    }
    valueDone();
  }

  /** A string or name of {@code utf8Length} bytes starts; its bytes follow, then {@link #endString}. */
  void startString(long utf8Length) {
    top().write(scratch, 0, header(STRING, utf8Length));
  }

  void stringBytes(ByteBuffer bytes) {
    top().write(bytes);
  }

  /**
   * The next piece of a string started with {@link #startString} whose text arrives as UTF-16 pieces
   * (a surrogate pair may be cut between two); {@link #endString} ends it.
   */
  void stringChars(char[] chars, int offset, int length) {
    Frame out = top();
    int n = 0;
    int i = offset;
    if (pendingHigh != 0 && length > 0) {
      if (Character.isLowSurrogate(chars[i])) {
        n = Utf8.put(Character.toCodePoint(pendingHigh, chars[i++]), scratch, n);
      } else {
        n = Utf8.put(pendingHigh, scratch, n);
      }
      pendingHigh = 0;
    }
    int end = offset + length;
    if (i < end && Character.isHighSurrogate(chars[end - 1])) {
      end--; // the pair's low half may start the next piece
      pendingHigh = chars[end];
    }
    out.write(scratch, 0, utf8(chars, i, end, n, out));
  }

  void endString() {
    if (pendingHigh != 0) {
      top().write(scratch, 0, Utf8.put(pendingHigh, scratch, 0)); // a lone surrogate as its three-byte form
      pendingHigh = 0;
    }
    endBytes();
  }

  /** A MessagePack bin value; its bytes follow, then {@link #endString}. */
  void startBinary(long length) {
    top().write(scratch, 0, header(BINARY, length));
  }

  /** A MessagePack ext value of the given type; its bytes follow, then {@link #endString}. */
  void startExtension(byte type, long length) {
    int n = header(EXTENSION, length);
    scratch[n++] = type;
    top().write(scratch, 0, n);
  }

  /** A whole string or name, as the JSON reader has it (UTF-16, already unescaped). */
  void string(char[] chars, int offset, int length) {
    byte tag = begin(STRING);
    Frame out = top();
    if (length <= SHORT_CHARS) {
      int at = encodeShort(tag, chars, offset, length);
      out.write(scratch, at, scratchEnd - at);
    } else {
      scratch[0] = tag;
      int n = putVarint(scratch, 1, Utf8.length(chars, offset, length));
      out.write(scratch, 0, utf8(chars, offset, offset + length, n, out));
    }
    endBytes();
  }

  /**
   * A whole member name as a {@code String}. A body repeats a few names ({@code role}, {@code
   * content}, …): the last {@value #NAME_SLOTS} short ones seen are kept encoded.
   */
  void string(String s) {
    int length = s.length();
    if (length > CACHED_NAME_CHARS) {
      char[] c = new char[length];
      s.getChars(0, length, c, 0);
      string(c, 0, length);
      return;
    }
    byte tag = begin(STRING);
    int slot = s.hashCode() & (NAME_SLOTS - 1);
    byte[] encoded = nameEncodings[slot];
    if (tag != NAME || encoded == null || !s.equals(names[slot])) {
      s.getChars(0, length, chars, 0);
      int at = encodeShort(tag, chars, 0, length);
      if (tag != NAME) {
        top().write(scratch, at, scratchEnd - at);
        endBytes();
        return;
      }
      if (encoded == null) {
        encoded = nameEncodings[slot] = new byte[HEADER_ROOM + 3 * CACHED_NAME_CHARS];
      }
      System.arraycopy(scratch, at, encoded, 0, scratchEnd - at);
      nameLengths[slot] = scratchEnd - at;
      names[slot] = s;
    }
    top().write(encoded, 0, nameLengths[slot]);
    endBytes();
  }

  /**
   * Encodes a string of at most {@link #SHORT_CHARS} chars, tag and length first, into {@code
   * scratch[at, scratchEnd)} in one pass (the bytes after room for the header, then the header, its
   * length now known); returns {@code at}.
   */
  private int encodeShort(byte tag, char[] chars, int offset, int length) {
    scratchEnd = utf8(chars, offset, offset + length, HEADER_ROOM, null); // never full: no writes
    int bytes = scratchEnd - HEADER_ROOM;
    int at = bytes < 0x80 ? HEADER_ROOM - 2 : HEADER_ROOM - 3;
    scratch[at] = tag;
    putVarint(scratch, at + 1, bytes);
    return at;
  }

  /**
   * Encodes {@code chars[i, end)} as UTF-8 into {@code scratch} from {@code n} on, writing each
   * full scratch to {@code out}; returns how much of {@code scratch} is left to write.
   */
  private int utf8(char[] chars, int i, int end, int n, Frame out) {
    for (; i < end; i++) {
      if (n > scratch.length - 4) {
        out.write(scratch, 0, n);
        n = 0;
      }
      // ASCII runs in a loop of their own: no room check per char
      for (int stop = Math.min(end, i + scratch.length - 4 - n); i < stop && chars[i] < 0x80; i++) {
        scratch[n++] = (byte) chars[i];
      }
      if (i == end) {
        break;
      }
      char c = chars[i];
      if (c < 0x80) {
        scratch[n++] = (byte) c;
      } else if (Character.isHighSurrogate(c) && i + 1 < end && Character.isLowSurrogate(chars[i + 1])) {
        n = Utf8.put(Character.toCodePoint(c, chars[++i]), scratch, n);
      } else {
        n = Utf8.put(c, scratch, n); // a lone surrogate as its three-byte form
      }
    }
    return n;
  }

  void integer(long value) {
    scratch[0] = INT64;
    int n = putVarint(scratch, 1, value << 1 ^ value >> 63); // zigzag: small magnitudes, few bytes
    top().write(scratch, 0, n);
    valueDone();
  }

  void integer(BigInteger value) {
    if (value.bitLength() < Long.SIZE) {
      integer(value.longValue()); // one value, one encoding, whatever type carried it
      return;
    }
    byte[] bytes = value.toByteArray();
    scratch[0] = BIG_INTEGER;
    int n = putVarint(scratch, 1, bytes.length);
    Frame out = top();
    out.write(scratch, 0, n);
    out.write(bytes, 0, bytes.length);
    valueDone();
  }

  void floating(double value) {
    if (value == Math.rint(value) && !Double.isInfinite(value)) {
      if (Math.abs(value) < TWO_TO_63) {
        integer((long) value); // -0.0 becomes 0
      } else {
        integer(new java.math.BigDecimal(value).toBigIntegerExact());
      }
      return;
    }
    scratch[0] = DOUBLE;
    LONG_BE.set(scratch, 1, Double.doubleToLongBits(value)); // one NaN, whatever its payload
    top().write(scratch, 0, 1 + Long.BYTES);
    valueDone();
  }

  void bool(boolean value) {
    top().write(value ? TRUE : FALSE);
    valueDone();
  }

  void nul() {
    top().write(NULL);
    valueDone();
  }

  // ---------------------------------------------------------------------------------------------

  private Frame top() {
    return frames[objects];
  }

  /**
   * Starts a string-like value, or a member's name: returns {@code tag}, or {@code 'k'} for a name.
   */
  private byte begin(byte tag) {
    Frame f = top();
    streamingName = containers > 0 && containerIsObject[containers - 1] && f.expectingName;
    if (!streamingName) {
      return tag;
    }
    if (f.form == Form.DEEP) {
      f.digest.reset(); // the member's digest: name, then value
    } else {
      f.startPart();
    }
    return NAME;
  }

  /** Starts a string-like value (or a member's name) and puts its header in {@code scratch}; returns its length. */
  private int header(byte tag, long length) {
    scratch[0] = begin(tag);
    return putVarint(scratch, 1, length);
  }

  private void endBytes() {
    if (streamingName) {
      streamingName = false;
      Frame f = top();
      f.expectingName = false;
      if (f.form != Form.DEEP) {
        f.endPart();
        f.startPart();
      }
    } else {
      valueDone();
    }
  }

  /** A value ended: it completes an object member, or the root. */
  private void valueDone() {
    if (containers == 0) {
      Frame root = frames[0];
      root.spill();
      result = new byte[DIGEST_BYTES];
      finish(root.digest, result, 0);
      return;
    }
    if (!containerIsObject[containers - 1]) {
      return; // an array element
    }
    Frame f = top();
    f.members++;
    f.expectingName = true;
    switch (f.form) {
      case DEEP -> {
        finish(f.digest, member, 0);
        f.addLanes(member, 0);
      }
      case LANES -> {
        f.endPart();
        addMember(f, 0, f.len);
        f.len = 0;
      }
      default -> {
        f.endPart();
        if (f.members == f.starts.length) {
          // up to one past the bound: where the member that exceeds it ends
          f.starts = Arrays.copyOf(f.starts, Math.min(2 * f.starts.length, SORT_MAX_MEMBERS + 2));
          f.order = new int[f.starts.length];
        }
        f.starts[(int) f.members] = f.len;
        if (f.members > SORT_MAX_MEMBERS || f.len > SORT_MAX_BYTES) {
          // Beyond the sorted form's bounds: the members so far go into the lanes, and so will the rest.
          f.form = Form.LANES;
          Arrays.fill(f.lanes, 0);
          for (int m = 0; m < f.members; m++) {
            addMember(f, f.starts[m], f.starts[m + 1] - f.starts[m]);
          }
          f.len = 0;
        }
      }
    }
  }

  /** Adds {@code SHA-256(f.buf[off, off + n))} to {@code f}'s lanes. */
  private void addMember(Frame f, int off, int n) {
    if (finisher == null) {
      finisher = sha256();
    }
    finisher.update(f.buf, off, n);
    finish(finisher, member, 0);
    f.addLanes(member, 0);
  }

  /**
   * Sorts the members' indices by their bytes, unsigned: a binary insertion sort, so at most about
   * 6 comparisons per member for {@value #SORT_MAX_MEMBERS} members.
   */
  private static void sort(byte[] buf, int[] starts, int[] order, int n) {
    for (int i = 1; i < n; i++) {
      int m = order[i];
      int lo = 0;
      int hi = i;
      while (lo < hi) {
        int mid = (lo + hi) >>> 1;
        if (compare(buf, starts, order[mid], m) <= 0) {
          lo = mid + 1;
        } else {
          hi = mid;
        }
      }
      System.arraycopy(order, lo, order, lo + 1, i - lo);
      order[lo] = m;
    }
  }

  private static int compare(byte[] buf, int[] starts, int a, int b) {
    return Arrays.compareUnsigned(buf, starts[a], starts[a + 1], buf, starts[b], starts[b + 1]);
  }

  /** Writes {@code value} as an unsigned LEB128 varint at {@code out[n]}; returns the new length. */
  private static int putVarint(byte[] out, int n, long value) {
    while ((value & ~0x7fL) != 0) {
      out[n++] = (byte) (value & 0x7f | 0x80);
      value >>>= 7;
    }
    out[n++] = (byte) value;
    return n;
  }

  /** Finalises {@code digest} into {@code out[off, off + 32)}; the digest is reset. */
  private static void finish(MessageDigest digest, byte[] out, int off) {
    try {
      digest.digest(out, off, DIGEST_BYTES);
    } catch (DigestException e) {
      throw new IllegalStateException("a SHA-256 digest is 32 bytes", e);
    }
  }

  static MessageDigest sha256() {
    try {
      return (MessageDigest) PROTOTYPE.clone(); // cheaper than a provider look-up
    } catch (CloneNotSupportedException e) {
      return newSha256();
    }
  }

  private static MessageDigest newSha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java runtime has SHA-256", e);
    }
  }
}
