package io.disaggusage.extproc.rewrite;

/** Byte-array helpers for the body processors. */
public final class Bytes {
  public static final byte[] EMPTY = new byte[0];

  private Bytes() {}

  /** {@code a} then {@code b}; returns one of them without copying when the other is empty. */
  public static byte[] concat(byte[] a, byte[] b) {
    if (a.length == 0) {
      return b;
    }
    if (b.length == 0) {
      return a;
    }
    byte[] out = new byte[a.length + b.length];
    System.arraycopy(a, 0, out, 0, a.length);
    System.arraycopy(b, 0, out, a.length, b.length);
    return out;
  }
}
