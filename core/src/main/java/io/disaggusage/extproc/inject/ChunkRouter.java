package io.disaggusage.extproc.inject;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Splits the chunk being read between bytes that go out with its reply and bytes held back for a
 * later one, for a rewriter that reads a byte at a time and changes little. Nothing is copied until
 * the reply really differs from the chunk: bytes held and released unchanged within the same chunk
 * never leave it, and the reply is then the chunk's own array. Held bytes keep their absolute offset
 * in the stream, so an edit can be applied to them when they are released.
 */
final class ChunkRouter {
  private byte[] chunk;
  private int runStart;
  /** Non-null once this chunk's reply differs from the chunk; holds the reply so far. */
  private ByteArrayOutputStream out;

  private boolean holding;
  /** While nothing was copied: the held bytes are chunk[holdFrom, runStart), still in place. */
  private int holdFrom = -1;
  private long heldStart;
  private long heldBytes;
  private final List<byte[]> held = new ArrayList<>();
  /** What was held when the chunk began, for {@link #recover}. */
  private List<byte[]> heldBefore = List.of();

  /** Starts reading {@code chunk}; it is kept (not copied) while held, so it must not change. */
  void begin(byte[] chunk) {
    this.chunk = chunk;
    runStart = 0;
    out = null;
    heldBefore = held.isEmpty() ? List.of() : List.copyOf(held);
  }

  /**
   * After a failure while reading the chunk: what was held before it, then the chunk, both unchanged;
   * everything else is forgotten.
   */
  byte[] recover() {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    heldBefore.forEach(segment -> bytes.write(segment, 0, segment.length));
    bytes.write(chunk, 0, chunk.length);
    forget();
    holdFrom = -1;
    heldBefore = List.of();
    chunk = null;
    out = null;
    return bytes.toByteArray();
  }

  /** Routes the rest of the chunk and returns the reply: the chunk itself when nothing changed. */
  byte[] end() {
    route(chunk.length);
    if (holdFrom >= 0) {
      changed(); // held bytes outlive the chunk: they leave it
    }
    byte[] reply = out == null ? chunk : out.toByteArray();
    chunk = null;
    out = null;
    return reply;
  }

  /** Sends chunk[read so far, upTo) where it belongs now: held, or out. */
  void route(int upTo) {
    if (chunk == null || upTo <= runStart) {
      return;
    }
    if (holding && holdFrom < 0) {
      changed(); // held across chunks: this reply lacks these bytes
      held.add(runStart == 0 && upTo == chunk.length ? chunk : Arrays.copyOfRange(chunk, runStart, upTo));
      heldBytes += upTo - runStart;
    } else if (!holding && out != null) {
      out.write(chunk, runStart, upTo - runStart);
    }
    runStart = upTo;
  }

  /** Leaves chunk[read so far, upTo) out of the stream; route what precedes those bytes first. */
  void skip(int upTo) {
    changed();
    runStart = Math.max(runStart, upTo);
  }

  /** From the next routed byte on, bytes are held; {@code absolute} is that byte's stream offset. */
  void hold(long absolute) {
    if (holding) {
      return;
    }
    holding = true;
    heldStart = absolute;
    if (out == null && chunk != null) {
      holdFrom = runStart;
    }
  }

  boolean holding() {
    return holding;
  }

  long heldBytes() {
    return heldBytes + (holdFrom >= 0 ? runStart - holdFrom : 0);
  }

  /** Adds bytes that were not in the input, after everything routed out so far. */
  void insert(byte[] bytes, int from) {
    changed();
    out.write(bytes, from, bytes.length - from);
  }

  /** Sends the held bytes out and stops holding; the absolute range [from, to) becomes {@code text}. */
  void release(long from, long to, byte[] text) {
    if (!holding) {
      return;
    }
    if (text == null && holdFrom >= 0) {
      holdFrom = -1; // still in place: they simply pass with the chunk
      holding = false;
      return;
    }
    changed();
    writeHeld(out, from, to, text);
    forget();
  }

  /** Sends the held bytes out unchanged and stops holding. */
  void release() {
    release(-1, -1, null);
  }

  /** Discards the held bytes (they are removed from the stream) and stops holding. */
  void drop() {
    if (holding) {
      changed();
      forget();
    }
  }

  /** Outside a chunk: the held bytes, unchanged, for the caller to send first; holding stops. */
  byte[] takeHeld() {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream((int) Math.min(heldBytes, Integer.MAX_VALUE - 8));
    writeHeld(bytes, -1, -1, null);
    forget();
    return bytes.toByteArray();
  }

  private void forget() {
    holding = false;
    held.clear();
    heldBytes = 0;
  }

  /**
   * This chunk's reply differs from the chunk: copy out what passed unchanged so far, and move held
   * bytes still in place into the held list.
   */
  private void changed() {
    if (out != null || chunk == null) {
      return;
    }
    out = new ByteArrayOutputStream(chunk.length + 64);
    if (holdFrom >= 0) {
      out.write(chunk, 0, holdFrom);
      held.add(holdFrom == 0 && runStart == chunk.length ? chunk : Arrays.copyOfRange(chunk, holdFrom, runStart));
      heldBytes += runStart - holdFrom;
      holdFrom = -1;
    } else {
      out.write(chunk, 0, runStart);
    }
  }

  private void writeHeld(ByteArrayOutputStream to, long from, long until, byte[] text) {
    boolean textDone = text == null;
    long at = heldStart;
    for (byte[] segment : held) {
      long segmentEnd = at + segment.length;
      if (!textDone && from < segmentEnd) {
        to.write(segment, 0, (int) (from - at));
        to.write(text, 0, text.length);
        textDone = true;
        int resume = (int) Math.min(segment.length, until - at);
        to.write(segment, resume, segment.length - resume);
      } else if (text != null && textDone && until > at) {
        int resume = (int) Math.min(segment.length, until - at); // the replaced range ends in here
        to.write(segment, resume, segment.length - resume);
      } else {
        to.write(segment, 0, segment.length);
      }
      at = segmentEnd;
    }
    if (!textDone) {
      to.write(text, 0, text.length);
    }
  }
}
