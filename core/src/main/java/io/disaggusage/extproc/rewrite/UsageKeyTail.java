package io.disaggusage.extproc.rewrite;

import io.disaggusage.extproc.sse.ByteSearch;

/**
 * The {@code "usage"} key search across the chunks of one SSE event: the last (at most six) bytes of
 * the event already released, so that a key straddling two chunks is still found.
 */
final class UsageKeyTail {
  static final byte[] USAGE_KEY = {'"', 'u', 's', 'a', 'g', 'e', '"'};
  /** The key's {@code g}: far rarer in JSON than its quote, so the search runs on it. */
  static final int USAGE_KEY_ANCHOR = 4;

  private final byte[] tail = new byte[USAGE_KEY.length - 1];
  private int length;

  /** A new event: nothing of it was released. */
  void reset() {
    length = 0;
  }

  /** How many released bytes are kept. */
  int length() {
    return length;
  }

  /**
   * Where {@code "usage"} starts in the kept tail followed by {@code chunk[offset, offset+n)}, as an
   * index into that concatenation; -1 when absent.
   */
  int indexOf(byte[] chunk, int offset, int n) {
    int straddling = straddling(chunk, offset, n, length);
    if (straddling >= 0) {
      return straddling;
    }
    int at = ByteSearch.indexOf(chunk, offset, offset + n, USAGE_KEY, USAGE_KEY_ANCHOR);
    return at < 0 ? -1 : length + at - offset;
  }

  /**
   * A {@code "usage"} key that starts in the first {@code tailLength} kept bytes and ends in
   * {@code chunk[offset, offset+n)}: its start in that concatenation, or -1.
   */
  int straddling(byte[] chunk, int offset, int n, int tailLength) {
    for (int i = 0; i < tailLength && i + USAGE_KEY.length <= tailLength + n; i++) {
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
  void remember(byte[] chunk, int offset, int n) {
    int keep = tail.length;
    if (n >= keep) {
      System.arraycopy(chunk, offset + n - keep, tail, 0, keep);
      length = keep;
      return;
    }
    int fromOld = Math.min(length, keep - n);
    System.arraycopy(tail, length - fromOld, tail, 0, fromOld);
    System.arraycopy(chunk, offset, tail, fromOld, n);
    length = fromOld + n;
  }
}
