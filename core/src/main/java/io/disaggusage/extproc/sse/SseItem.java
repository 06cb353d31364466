package io.disaggusage.extproc.sse;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

/**
 * One piece of an SSE byte stream as emitted by {@link SseFramer}: either a complete {@link SseEvent}
 * or bytes that are passed through without being parsed ({@link SsePassThrough}).
 *
 * <p>Every item owns a byte array of exactly {@link #rawLength()} bytes. The concatenation of the raw
 * bytes of all items emitted for a stream, in emission order, equals the stream's input bytes.
 */
public sealed interface SseItem permits SseEvent, SsePassThrough {

  /**
   * The item's raw bytes. The returned array is the item's own storage (no copy) and its length is
   * {@link #rawLength()}; callers must not modify it. Use {@link #rawBytes()} for a private copy.
   */
  byte[] rawArray();

  /** Number of raw bytes. */
  default int rawLength() {
    return rawArray().length;
  }

  /** A copy of the raw bytes. */
  default byte[] rawBytes() {
    return rawArray().clone();
  }

  /** Writes the raw bytes to {@code out}. */
  default void writeRawTo(OutputStream out) throws IOException {
    out.write(rawArray());
  }

  /** The raw bytes decoded as UTF-8 (malformed sequences replaced); meant for logs and tests. */
  default String rawString() {
    return new String(rawArray(), StandardCharsets.UTF_8);
  }
}
