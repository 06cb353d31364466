package io.disaggusage.extproc.rewrite;

import java.util.Arrays;

/**
 * The held part of a JSON generation body: from the usage object's opening brace on, the usage object
 * ({@code [0, usageLength)}, up to {@code maxUsageBytes}) and what followed it (up to {@code
 * maxHeldBytes} in all). Memory per stream is this part, not the body.
 */
final class HeldJsonBytes {
  private final int maxUsageBytes;
  private final int maxHeldBytes;
  private byte[] bytes = Bytes.EMPTY;
  private int length;
  private int usageLength;

  HeldJsonBytes(int maxUsageBytes, int maxHeldBytes) {
    this.maxUsageBytes = maxUsageBytes;
    this.maxHeldBytes = maxHeldBytes;
  }

  /** Whether {@code n} more bytes stay within the limit: the usage object's while {@code capturing}. */
  boolean fits(int n, boolean capturing) {
    return length + n <= (capturing ? maxUsageBytes : maxHeldBytes);
  }

  void add(byte[] chunk, int from, int n) {
    if (n == 0) {
      return;
    }
    if (bytes.length - length < n) {
      int size = Math.max(length + n, bytes.length == 0 ? 512 : bytes.length * 2);
      bytes = Arrays.copyOf(bytes, size);
    }
    System.arraycopy(chunk, from, bytes, length, n);
    length += n;
  }

  /** The usage object ends with the bytes held so far. */
  void usageEnds() {
    usageLength = length;
  }

  int length() {
    return length;
  }

  int usageLength() {
    return usageLength;
  }

  /** The backing array: {@code [0, length())} is held. */
  byte[] array() {
    return bytes;
  }

  /** The held bytes, as they came. */
  byte[] copy() {
    return Arrays.copyOf(bytes, length);
  }

  /** Hands the held bytes, if any, to {@code ready} unmodified and holds nothing. */
  void releaseTo(ReadyBytes ready) {
    if (length > 0) {
      ready.add(bytes, 0, length);
    }
    drop();
  }

  /** Holds nothing. */
  void drop() {
    bytes = Bytes.EMPTY;
    length = 0;
    usageLength = 0;
  }
}
