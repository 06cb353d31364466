package io.disaggusage.extproc.testkit;

import java.util.Arrays;

/**
 * A fuzz input read as a document followed by a fixed-size trailer of parameters. Keeping the
 * parameters at the end, in a fixed number of bytes, makes seed files simple to write (the scenario
 * bytes, then {@link #TRAILER} bytes) and lets the fuzzer mutate both.
 */
public final class FuzzInput {
  /** Parameter bytes at the end of every input. */
  public static final int TRAILER = 16;

  private final byte[] document;
  private final byte[] params;
  private int next;

  public FuzzInput(byte[] input) {
    int split = Math.max(0, input.length - TRAILER);
    this.document = Arrays.copyOfRange(input, 0, split);
    this.params = Arrays.copyOf(Arrays.copyOfRange(input, split, input.length), TRAILER);
  }

  /** The bytes under test. */
  public byte[] document() {
    return document;
  }

  /** The next parameter byte, 0..255 (0 once the trailer is used up). */
  public int nextByte() {
    return next < params.length ? params[next++] & 0xff : 0;
  }

  /** A value in {@code [0, bound)}. */
  public int choose(int bound) {
    return nextByte() % bound;
  }

  public boolean flag() {
    return (nextByte() & 1) == 1;
  }

  /** Four parameter bytes as an int. */
  public int nextInt() {
    return nextByte() << 24 | nextByte() << 16 | nextByte() << 8 | nextByte();
  }

  /** A seed file: {@code document} then a trailer of {@code params} (zero-padded). */
  public static byte[] seed(byte[] document, int... params) {
    byte[] out = Arrays.copyOf(document, document.length + TRAILER);
    for (int i = 0; i < params.length && i < TRAILER; i++) {
      out[document.length + i] = (byte) params[i];
    }
    return out;
  }
}
