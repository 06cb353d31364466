package io.disaggusage.extproc.json;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * A set of non-overlapping replacements in a byte array: the way usage is rewritten without touching
 * a single byte outside the values that change. Insertions are replacements of an empty range;
 * several insertions at one offset keep the order they were added in.
 */
public final class ByteEdits {

  /** Replace {@code [start, end)} with {@code text}. */
  public record Edit(int start, int end, byte[] text) {}

  private final List<Edit> edits = new ArrayList<>(4);

  public void replace(int start, int end, String text) {
    edits.add(new Edit(start, end, text.getBytes(StandardCharsets.UTF_8)));
  }

  public void insert(int at, String text) {
    replace(at, at, text);
  }

  public boolean isEmpty() {
    return edits.isEmpty();
  }

  /** The edits in application order (by offset, insertions in the order added). */
  public List<Edit> sorted() {
    List<Edit> sorted = new ArrayList<>(edits);
    sorted.sort(Comparator.comparingInt(Edit::start)); // stable: keeps insertion order at one offset
    return sorted;
  }

  /** Applies the edits to {@code source[from, to)}, whose offsets the edits are relative to {@code from}. */
  public byte[] applyTo(byte[] source, int from, int to) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(to - from + 64);
    int pos = 0;
    for (Edit edit : sorted()) {
      out.write(source, from + pos, edit.start() - pos);
      out.write(edit.text(), 0, edit.text().length);
      pos = edit.end();
    }
    out.write(source, from + pos, to - from - pos);
    return out.toByteArray();
  }
}
