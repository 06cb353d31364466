package io.disaggusage.extproc.edge;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * A JSON document as the edge tests build it: objects with the exact whitespace, key spelling and value
 * text to write, so a test knows, apart from the remover, what each member's bytes are, which members
 * the paths remove and what the output must be.
 */
final class JsonDoc {
  private JsonDoc() {}

  /** The blanks of one object: after {, before and after each colon, before and after each comma, before }. */
  record Ws(String open, String beforeColon, String afterColon, String beforeComma, String afterComma, String close) {
    static final Ws COMPACT = new Ws("", "", "", "", "", "");
    static final Ws SPACED = new Ws(" ", " ", " ", " ", " ", " ");
    static final Ws PRETTY = new Ws("\n  ", "", " ", "", "\n  ", "\n");
    static final Ws CRLF_TABS = new Ws("\r\n\t", "\t", "\t", "\r\n", "\t", "\r\n");
    static final List<Ws> ALL = List.of(COMPACT, SPACED, PRETTY, CRLF_TABS);
  }

  /** A value: raw JSON text, an array of values, or an object. */
  sealed interface Value permits Raw, Arr, Obj {}

  record Raw(String text) implements Value {}

  record Arr(List<Value> items, String blank) implements Value {}

  record Obj(List<Member> members, Ws ws) implements Value {}

  /**
   * One member: {@code key} as written (quotes included, escapes as they are), {@code name} decoded.
   */
  record Member(String key, String name, Value value) {
    static Member plain(String name, Value value) {
      return new Member("\"" + name + "\"", name, value);
    }
  }

  /** The document's bytes, and where the members the paths remove sit in them. */
  static final class Rendered {
    final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    /** {@code [start, end)} of each removed member: its key's quote to its value's end. */
    final List<long[]> removedSpans = new ArrayList<>();
    /** Commas the removal must take: one per removed member, but one less in an object left empty. */
    int removedCommas;

    byte[] toBytes() {
      return bytes.toByteArray();
    }

    private void write(String text) {
      bytes.writeBytes(text.getBytes(StandardCharsets.UTF_8));
    }
  }

  static Rendered render(Value value, MemberPaths.Node node) {
    Rendered out = new Rendered();
    write(value, node, out);
    return out;
  }

  static String text(Value value) {
    return new String(render(value, null).toBytes(), StandardCharsets.UTF_8);
  }

  private static void write(Value value, MemberPaths.Node node, Rendered out) {
    if (value instanceof Raw raw) {
      out.write(raw.text());
    } else if (value instanceof Arr arr) {
      out.write("[" + arr.blank());
      for (int i = 0; i < arr.items().size(); i++) {
        if (i > 0) {
          out.write("," + arr.blank());
        }
        write(arr.items().get(i), null, out);
      }
      out.write(arr.blank() + "]");
    } else {
      writeObject((Obj) value, node, out);
    }
  }

  private static void writeObject(Obj obj, MemberPaths.Node node, Rendered out) {
    Ws ws = obj.ws();
    out.write("{" + ws.open());
    int removed = 0;
    for (int i = 0; i < obj.members().size(); i++) {
      Member m = obj.members().get(i);
      if (i > 0) {
        out.write(ws.beforeComma() + "," + ws.afterComma());
      }
      long start = out.bytes.size();
      out.write(m.key() + ws.beforeColon() + ":" + ws.afterColon());
      boolean remove = node != null && node.removedPath(m.name()) != null;
      write(m.value(), remove || node == null ? null : node.child(m.name()), out);
      if (remove) {
        out.removedSpans.add(new long[] {start, out.bytes.size()});
        removed++;
      }
    }
    out.removedCommas += removed > 0 && removed == obj.members().size() ? removed - 1 : removed;
    out.write(ws.close() + "}");
  }

  /**
   * What the remover must make of {@code value}: the rules written over the parts rather than bytes.
   * A removed member takes the comma before it when a kept member precedes it (blanks before that comma
   * stay); otherwise it takes everything up to the next kept member's key; the object's blanks stay.
   */
  static String expected(Value value, MemberPaths.Node node) {
    if (!(value instanceof Obj obj) || node == null) {
      return text(value);
    }
    Ws ws = obj.ws();
    StringBuilder out = new StringBuilder("{" + ws.open());
    boolean kept = false;
    boolean removedFirst = false;
    for (int i = 0; i < obj.members().size(); i++) {
      Member m = obj.members().get(i);
      boolean remove = node.removedPath(m.name()) != null;
      if (remove) {
        if (kept) {
          out.append(ws.beforeComma());
        }
        removedFirst |= !kept;
        continue;
      }
      if (kept) {
        out.append(ws.beforeComma()).append(',').append(ws.afterComma());
      }
      kept = true;
      out.append(m.key()).append(ws.beforeColon()).append(':').append(ws.afterColon());
      out.append(expected(m.value(), node.child(m.name())));
    }
    return out.append(ws.close()).append('}').toString();
  }

  /** Every distinct removed path the document holds, counted. */
  static java.util.Map<String, Integer> removedCounts(Value value, MemberPaths.Node node) {
    java.util.Map<String, Integer> counts = new java.util.TreeMap<>();
    count(value, node, counts);
    return counts;
  }

  private static void count(Value value, MemberPaths.Node node, java.util.Map<String, Integer> counts) {
    if (!(value instanceof Obj obj) || node == null) {
      return;
    }
    for (Member m : obj.members()) {
      String path = node.removedPath(m.name());
      if (path != null) {
        counts.merge(path, 1, Integer::sum);
      } else {
        count(m.value(), node.child(m.name()), counts);
      }
    }
  }
}
