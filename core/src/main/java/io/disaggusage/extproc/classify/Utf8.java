package io.disaggusage.extproc.classify;

/**
 * UTF-8 encoding of UTF-16 text without a {@code CharsetEncoder}: a lone surrogate is encoded as its
 * three-byte form instead of failing or being replaced, so the bytes are defined for every string
 * Jackson can hand over and differ from those of every valid string.
 */
final class Utf8 {
  private Utf8() {}

  /** The number of bytes {@code chars[offset, offset + length)} encode to. */
  static long length(char[] chars, int offset, int length) {
    long bytes = 0;
    int end = offset + length;
    for (int i = offset; i < end; i++) {
      char c = chars[i];
      if (c < 0x80) {
        bytes += 1;
      } else if (c < 0x800) {
        bytes += 2;
      } else if (Character.isHighSurrogate(c) && i + 1 < end && Character.isLowSurrogate(chars[i + 1])) {
        bytes += 4;
        i++;
      } else {
        bytes += 3;
      }
    }
    return bytes;
  }

  /** Writes one code point (or lone surrogate) at {@code out[n]}; returns the new length. */
  static int put(int codePoint, byte[] out, int n) {
    if (codePoint < 0x80) {
      out[n++] = (byte) codePoint;
    } else if (codePoint < 0x800) {
      out[n++] = (byte) (0xc0 | codePoint >> 6);
      out[n++] = (byte) (0x80 | codePoint & 0x3f);
    } else if (codePoint < 0x10000) {
      out[n++] = (byte) (0xe0 | codePoint >> 12);
      out[n++] = (byte) (0x80 | codePoint >> 6 & 0x3f);
      out[n++] = (byte) (0x80 | codePoint & 0x3f);
    } else {
      out[n++] = (byte) (0xf0 | codePoint >> 18);
      out[n++] = (byte) (0x80 | codePoint >> 12 & 0x3f);
      out[n++] = (byte) (0x80 | codePoint >> 6 & 0x3f);
      out[n++] = (byte) (0x80 | codePoint & 0x3f);
    }
    return n;
  }
}
