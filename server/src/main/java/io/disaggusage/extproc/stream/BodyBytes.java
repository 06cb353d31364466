package io.disaggusage.extproc.stream;

import com.google.protobuf.ByteOutput;
import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;
import java.nio.ByteBuffer;

/**
 * The bytes of a body chunk Envoy sent, without copying them. {@code ByteString.toByteArray()} copies
 * every chunk, which was a third of all the service allocated on the data path; protobuf parses a
 * {@code bytes} field into a {@code ByteString} over an array of exactly its size, which
 * {@link UnsafeByteOperations#unsafeWriteTo} hands over as it is. That array is then shared with the
 * request message, so nothing here or in the body processors writes into it (they copy what they
 * change). Any other layout (a slice, a rope, a direct buffer) is copied as before.
 */
public final class BodyBytes {
  private static final byte[] EMPTY = new byte[0];

  private BodyBytes() {}

  /** The chunk's bytes: the backing array itself when it is exactly the chunk, else a copy. */
  public static byte[] of(ByteString body) {
    if (body.isEmpty()) {
      return EMPTY;
    }
    Backing backing = new Backing();
    try {
      UnsafeByteOperations.unsafeWriteTo(body, backing);
    } catch (java.io.IOException e) {
      throw new IllegalStateException("a ByteOutput that does no I/O cannot fail", e);
    }
    return backing.whole != null && backing.whole.length == body.size() ? backing.whole : body.toByteArray();
  }

  /**
   * {@code bytes} as the body of a reply, without copying: every array the service puts in a reply is
   * one it will not write again — a filter's output, a concatenation made for the reply, or a chunk
   * Envoy sent, which nothing writes into ({@link #of}). A copy here was the largest allocation of a
   * generation stream whose usage event came in the same chunk as the rest of the body.
   */
  public static ByteString wrap(byte[] bytes) {
    return UnsafeByteOperations.unsafeWrap(bytes);
  }

  /** Keeps the array of a single whole-array write; anything else leaves {@code whole} null. */
  private static final class Backing extends ByteOutput {
    byte[] whole;
    boolean other;

    @Override
    public void writeLazy(byte[] value, int offset, int length) {
      if (!other && whole == null && offset == 0 && length == value.length) {
        whole = value;
      } else {
        mixed();
      }
    }

    @Override
    public void write(byte value) {
      mixed();
    }

    @Override
    public void write(byte[] value, int offset, int length) {
      mixed();
    }

    @Override
    public void write(ByteBuffer value) {
      mixed();
    }

    @Override
    public void writeLazy(ByteBuffer value) {
      mixed();
    }

    private void mixed() {
      other = true;
      whole = null;
    }
  }
}
