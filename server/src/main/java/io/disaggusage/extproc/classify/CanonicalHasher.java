package io.disaggusage.extproc.classify;

import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;

/**
 * A SHA-256 digest of one JSON (or MessagePack) value's canonical form, fed the value's events as a
 * reader streams them: no value, string or name is ever held, only one digest state per open
 * container. Two spellings of one value give the same digest:
 *
 * <ul>
 *   <li>objects: each member is hashed on its own, {@code SHA-256(name, value)}, and the members'
 *       digests are added lane by lane (four 64-bit lanes, mod 2^64), so member order does not matter
 *       (llm-d's pd-sidecar re-serialises bodies with sorted keys); the object's digest covers the
 *       member count and the sums. A duplicated name counts as two members, as written.
 *   <li>arrays: the elements' encodings in order, one running digest.
 *   <li>strings and names: their UTF-8 bytes after unescaping ({@code "\u0041"} is {@code "A"}),
 *       length-prefixed. A lone surrogate (JSON only) is encoded as its three-byte form, so it matches
 *       nothing valid.
 *   <li>numbers, by value: an integer is exact at any size (int64 ids above 2^53 included); a number
 *       with a fraction or exponent (and a MessagePack float) is the nearest double, because every
 *       producer on the way (Python, Go, msgspec) holds it as one; a double that is a whole number is
 *       that integer, so {@code 1}, {@code 1.0}, {@code 1e0} and {@code -0.0 = 0} agree; a float32 is
 *       the double of exactly its value.
 *   <li>whitespace is not an event; {@code true}, {@code false}, {@code null} are tags.
 * </ul>
 *
 * Every encoding starts with a tag byte and is self-delimiting, so a sequence of them decodes one way.
 * MessagePack bin and ext values (which JSON cannot express) have their own tags.
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
  private static final byte OBJECT = 'O';
  private static final byte CONTAINER = 'c';

  static final int DIGEST_BYTES = 32;
  private static final int LANES = DIGEST_BYTES / Long.BYTES;
  /** 2^63 as a double: the first whole double that is no longer an int64. */
  private static final double TWO_TO_63 = 0x1p63;

  /**
   * One open container. An array's digest runs over its elements; an object's digest is reused per
   * member (name, then value) and its finished members are summed into {@code lanes}.
   */
  private static final class Frame {
    final MessageDigest digest = sha256();
    final long[] lanes = new long[LANES];
    boolean object;
    long members;
    /** Object only: the next string is a member name. */
    boolean expectingName;
  }

  private Frame[] frames = new Frame[4];
  private int depth;
  /** Where a value at the root goes: scalars are encoded into it, a container's digest is fed to it. */
  private final MessageDigest root = sha256();
  private final byte[] scratch = new byte[512];
  private final ByteBuffer scratchLong = ByteBuffer.allocate(Long.BYTES);
  private byte[] result;
  /** The string being streamed is a member name. */
  private boolean streamingName;

  /** Forgets everything: the next event starts a new value. */
  void reset() {
    depth = 0;
    result = null;
    root.reset();
  }

  /** The value is complete; {@link #digest()} is its digest. */
  boolean complete() {
    return result != null;
  }

  /** The 32-byte digest of the completed value. */
  byte[] digest() {
    return result;
  }

  void startContainer(boolean object) {
    MessageDigest sink = sink();
    sink.update(CONTAINER); // the container's digest follows when it ends
    if (depth == frames.length) {
      frames = Arrays.copyOf(frames, depth * 2);
    }
    Frame f = frames[depth];
    if (f == null) {
      f = frames[depth] = new Frame();
    }
    f.digest.reset();
    Arrays.fill(f.lanes, 0);
    f.members = 0;
    f.object = object;
    f.expectingName = object;
    if (!object) {
      f.digest.update(ARRAY);
    }
    depth++;
  }

  void endContainer() {
    Frame f = frames[--depth];
    byte[] digest;
    if (f.object) {
      f.digest.reset();
      f.digest.update(OBJECT);
      updateLong(f.digest, f.members);
      for (long lane : f.lanes) {
        updateLong(f.digest, lane);
      }
    }
    digest = f.digest.digest();
    sink().update(digest);
    valueDone();
  }

  /** A string or name of {@code utf8Length} bytes starts; its bytes follow, then {@link #endString}. */
  void startString(long utf8Length) {
    startBytes(STRING, utf8Length);
  }

  void stringBytes(ByteBuffer bytes) {
    sink().update(bytes);
  }

  void endString() {
    endBytes();
  }

  /** A MessagePack bin value; its bytes follow, then {@link #endString}. */
  void startBinary(long length) {
    startBytes(BINARY, length);
  }

  /** A MessagePack ext value of the given type; its bytes follow, then {@link #endString}. */
  void startExtension(byte type, long length) {
    startBytes(EXTENSION, length);
    sink().update(type);
  }

  /** A whole string or name, as the JSON reader has it (UTF-16, already unescaped). */
  void string(char[] chars, int offset, int length) {
    startString(Utf8.length(chars, offset, length));
    MessageDigest sink = sink();
    int n = 0;
    int end = offset + length;
    for (int i = offset; i < end; i++) {
      if (n > scratch.length - 4) {
        sink.update(scratch, 0, n);
        n = 0;
      }
      char c = chars[i];
      if (Character.isHighSurrogate(c) && i + 1 < end && Character.isLowSurrogate(chars[i + 1])) {
        n = Utf8.put(Character.toCodePoint(c, chars[++i]), scratch, n);
      } else {
        n = Utf8.put(c, scratch, n); // a lone surrogate as its three-byte form
      }
    }
    sink.update(scratch, 0, n);
    endString();
  }

  void integer(long value) {
    MessageDigest sink = sink();
    sink.update(INT64);
    updateLong(sink, value);
    valueDone();
  }

  void integer(BigInteger value) {
    if (value.bitLength() < Long.SIZE) {
      integer(value.longValue()); // one value, one encoding, whatever type carried it
      return;
    }
    byte[] bytes = value.toByteArray();
    MessageDigest sink = sink();
    sink.update(BIG_INTEGER);
    updateLong(sink, bytes.length);
    sink.update(bytes);
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
    MessageDigest sink = sink();
    sink.update(DOUBLE);
    updateLong(sink, Double.doubleToLongBits(value)); // one NaN, whatever its payload
    valueDone();
  }

  void bool(boolean value) {
    sink().update(value ? TRUE : FALSE);
    valueDone();
  }

  void nul() {
    sink().update(NULL);
    valueDone();
  }

  // ---------------------------------------------------------------------------------------------

  private void startBytes(byte tag, long length) {
    Frame f = depth == 0 ? null : frames[depth - 1];
    streamingName = f != null && f.expectingName;
    MessageDigest sink;
    if (streamingName) {
      sink = f.digest; // the member's digest: name, then value
      sink.reset();
      sink.update(NAME);
    } else {
      sink = sink();
      sink.update(tag);
    }
    updateLong(sink, length);
  }

  private void endBytes() {
    if (streamingName) {
      streamingName = false;
      frames[depth - 1].expectingName = false;
    } else {
      valueDone();
    }
  }

  /**
   * Where the next value (or a member name) is encoded: the root, the array's digest, or the
   * member's digest.
   */
  private MessageDigest sink() {
    return depth == 0 ? root : frames[depth - 1].digest;
  }

  /** A value ended: it completes an object member, or the root. */
  private void valueDone() {
    if (depth == 0) {
      result = root.digest();
      return;
    }
    Frame f = frames[depth - 1];
    if (f.object) {
      byte[] member = f.digest.digest();
      ByteBuffer lanes = ByteBuffer.wrap(member);
      for (int i = 0; i < LANES; i++) {
        f.lanes[i] += lanes.getLong();
      }
      f.members++;
      f.expectingName = true;
    }
  }

  private void updateLong(MessageDigest digest, long value) {
    scratchLong.clear();
    scratchLong.putLong(value);
    digest.update(scratchLong.array(), 0, Long.BYTES);
  }

  static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java runtime has SHA-256", e);
    }
  }
}
