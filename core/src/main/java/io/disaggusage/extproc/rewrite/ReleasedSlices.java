package io.disaggusage.extproc.rewrite;

import java.util.ArrayList;

/**
 * The bytes an SSE generation leg released since the last {@link #take}: slices of arrays nothing
 * writes again (chunks as the caller gave them, events as framed or patched), joined once when taken
 * — one copy of a chunk that leaves changed, none of one that leaves whole — so no output buffer grows
 * per chunk or stays chunk-sized while the stream idles. Unlike {@link ReadyBytes}, nothing is copied
 * before the take.
 */
final class ReleasedSlices {
  private record Slice(byte[] bytes, int from, int length) {}

  private final ArrayList<Slice> slices = new ArrayList<>();
  private int size;

  void add(byte[] bytes, int from, int length) {
    if (length <= 0) {
      return;
    }
    size += length;
    int last = slices.size() - 1;
    if (last >= 0) {
      Slice previous = slices.get(last);
      if (previous.bytes() == bytes && previous.from() + previous.length() == from) {
        // The next event of the same chunk: one slice for the run, so a chunk released event by
        // event is joined with one copy per run, not one per event (or with none when it is whole).
        slices.set(last, new Slice(bytes, previous.from(), previous.length() + length));
        return;
      }
    }
    slices.add(new Slice(bytes, from, length));
  }

  /** Everything released, in order; empty when nothing is. */
  byte[] take() {
    if (size == 0) {
      slices.clear();
      return Bytes.EMPTY;
    }
    byte[] out;
    Slice first = slices.get(0);
    if (slices.size() == 1 && first.from() == 0 && first.length() == first.bytes().length) {
      out = first.bytes(); // one whole array (usually the chunk as it came): no copy
    } else {
      out = new byte[size];
      int at = 0;
      for (Slice slice : slices) {
        System.arraycopy(slice.bytes(), slice.from(), out, at, slice.length());
        at += slice.length();
      }
    }
    slices.clear();
    size = 0;
    return out;
  }
}
