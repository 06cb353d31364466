package io.disaggusage.extproc.rewrite;

import java.util.Arrays;

/**
 * The bytes a body processor has ready to go out, in order. An array added whole while nothing else
 * is pending is handed back as it is (no copy, so a chunk forwarded untouched stays the caller's own
 * array); pieces are gathered in one buffer that is reused while it stays small.
 */
final class ReadyBytes {
  /** A gathering buffer up to this size is kept for the next pieces. */
  private static final int KEEP = 8192;

  private byte[] whole;
  private byte[] buffer;
  private int length;

  void add(byte[] bytes) {
    add(bytes, 0, bytes.length);
  }

  void add(byte[] bytes, int from, int n) {
    if (n == 0) {
      return;
    }
    if (whole == null && length == 0) {
      if (from == 0 && n == bytes.length) {
        whole = bytes;
        return;
      }
      if (n > KEEP) {
        whole = Arrays.copyOfRange(bytes, from, from + n);
        return;
      }
    }
    if (whole != null) {
      byte[] first = whole;
      whole = null;
      append(first, 0, first.length);
    }
    append(bytes, from, n);
  }

  /** Bytes pending. */
  int size() {
    return whole != null ? whole.length : length;
  }

  /** Everything pending, in order; empty when nothing is. */
  byte[] take() {
    if (whole != null) {
      byte[] out = whole;
      whole = null;
      return out;
    }
    if (length == 0) {
      return Bytes.EMPTY;
    }
    byte[] out;
    if (length == buffer.length) {
      out = buffer;
      buffer = null;
    } else {
      out = Arrays.copyOf(buffer, length);
      if (buffer.length > KEEP) {
        buffer = null;
      }
    }
    length = 0;
    return out;
  }

  private void append(byte[] bytes, int from, int n) {
    if (buffer == null || buffer.length - length < n) {
      int size = Math.max(length + n, buffer == null ? 256 : buffer.length * 2);
      buffer = buffer == null ? new byte[size] : Arrays.copyOf(buffer, size);
    }
    System.arraycopy(bytes, from, buffer, length, n);
    length += n;
  }
}
