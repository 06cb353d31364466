package io.disaggusage.extproc.sse;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * Byte searches on the hot path of every response chunk, eight bytes at a time ("SWAR": a word is
 * read as a {@code long} and all eight bytes are tested with a few arithmetic operations). A
 * byte-at-a-time loop spent a third of the service's CPU in the end-to-end benchmark looking for line
 * terminators; Java 17 has no public intrinsic for searching a {@code byte[]}.
 *
 * <p>The zero-byte test {@code (v - 0x01..01) & ~v & 0x80..80} can flag a byte that is not zero, but
 * only above (more significant than) a byte that is: reading words little-endian, the lowest flagged
 * byte is always a true match, which is the only one used.
 */
public final class ByteSearch {
  private static final VarHandle LONGS =
      MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
  private static final long ONES = 0x0101010101010101L;
  private static final long HIGHS = 0x8080808080808080L;
  private static final long LFS = ONES * '\n';
  private static final long CRS = ONES * '\r';

  private ByteSearch() {}

  /** Index of the first {@code \n} or {@code \r} in {@code a[from, to)}; {@code to} when none. */
  public static int lineBreak(byte[] a, int from, int to) {
    int i = from;
    for (; i + Long.BYTES <= to; i += Long.BYTES) {
      long w = (long) LONGS.get(a, i);
      long found = zeroBytes(w ^ LFS) | zeroBytes(w ^ CRS);
      if (found != 0) {
        return i + (Long.numberOfTrailingZeros(found) >>> 3);
      }
    }
    for (; i < to; i++) {
      byte b = a[i];
      if (b == '\n' || b == '\r') {
        return i;
      }
    }
    return to;
  }

  /** Index of the first {@code \n}, {@code \r} or {@code other} in {@code a[from, to)}; {@code to} when none. */
  public static int lineBreakOr(byte[] a, int from, int to, byte other) {
    long others = ONES * (other & 0xFF);
    int i = from;
    for (; i + Long.BYTES <= to; i += Long.BYTES) {
      long w = (long) LONGS.get(a, i);
      long found = zeroBytes(w ^ LFS) | zeroBytes(w ^ CRS) | zeroBytes(w ^ others);
      if (found != 0) {
        return i + (Long.numberOfTrailingZeros(found) >>> 3);
      }
    }
    for (; i < to; i++) {
      byte b = a[i];
      if (b == '\n' || b == '\r' || b == other) {
        return i;
      }
    }
    return to;
  }

  /**
   * Index of the first occurrence of {@code needle} wholly inside {@code a[from, to)}; -1 when none.
   * The search runs on {@code needle[anchor]}, so pass the index of a byte that is rare in the text
   * searched (for {@code "usage"} in JSON, the {@code g} rather than the quote).
   */
  public static int indexOf(byte[] a, int from, int to, byte[] needle, int anchor) {
    int n = needle.length;
    long pattern = ONES * (needle[anchor] & 0xFF);
    // Candidate anchors lie in [from + anchor, to - n + anchor + 1).
    int i = from + anchor;
    int last = to - n + anchor; // inclusive
    for (; i + Long.BYTES - 1 <= last; i += Long.BYTES) {
      long found = zeroBytes((long) LONGS.get(a, i) ^ pattern);
      while (found != 0) {
        int at = i + (Long.numberOfTrailingZeros(found) >>> 3);
        if (matchesAt(a, at - anchor, needle)) {
          return at - anchor;
        }
        // Clear the lowest flagged byte; bytes above it may be false flags, checked by matchesAt.
        found &= found - 1;
      }
    }
    for (; i <= last; i++) {
      if (a[i] == needle[anchor] && matchesAt(a, i - anchor, needle)) {
        return i - anchor;
      }
    }
    return -1;
  }

  /** Whether {@code needle} occurs at {@code a[start]} (the caller keeps it inside {@code a}). */
  public static boolean matchesAt(byte[] a, int start, byte[] needle) {
    for (int k = 0; k < needle.length; k++) {
      if (a[start + k] != needle[k]) {
        return false;
      }
    }
    return true;
  }

  private static long zeroBytes(long v) {
    return (v - ONES) & ~v & HIGHS;
  }
}
