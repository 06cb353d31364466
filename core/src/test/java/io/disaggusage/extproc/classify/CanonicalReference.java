package io.disaggusage.extproc.classify;

import java.io.ByteArrayOutputStream;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Random;

/**
 * The prompt fingerprint's canonical form as docs/behaviour.md states it, computed from a whole value
 * held in memory (the way nobody should compute it in the service): what the streaming {@link
 * CanonicalHasher} must agree with exactly. Values: {@link String}, {@link BigInteger} (an integer),
 * {@link Double}, {@link Boolean}, {@link #NULL}, {@link Arr}, {@link Obj} (members in order,
 * duplicates kept). Also writes values as JSON, plainly or re-spelled at random.
 */
final class CanonicalReference {
  private CanonicalReference() {}

  static final Object NULL = new Object() {
    @Override
    public String toString() {
      return "null";
    }
  };

  record Member(String name, Object value) {}

  record Obj(List<Member> members) {
    Obj {
      members = List.copyOf(members);
    }
  }

  record Arr(List<Object> items) {
    Arr {
      items = List.copyOf(items);
    }
  }

  static Obj obj(Object... namesAndValues) {
    List<Member> members = new ArrayList<>();
    for (int i = 0; i < namesAndValues.length; i += 2) {
      members.add(new Member((String) namesAndValues[i], namesAndValues[i + 1]));
    }
    return new Obj(members);
  }

  static Arr arr(Object... items) {
    return new Arr(Arrays.asList(items));
  }

  static BigInteger integer(long v) {
    return BigInteger.valueOf(v);
  }

  // ---------------------------------------------------------------------------------------------
  // The canonical encoding

  /** The fingerprint of the body {@code {"model": model, "prompt": prompt}} (model null: absent). */
  static PromptFingerprint fingerprint(String model, Object prompt) {
    MessageDigest sha = CanonicalHasher.sha256();
    sha.update("disagg-usage-fingerprint/2".getBytes(StandardCharsets.US_ASCII));
    if (model != null) {
      sha.update((byte) 0);
      sha.update(sha256(enc(model)));
    }
    sha.update((byte) 3); // prompt's index among model, messages, system, prompt, input, instructions
    sha.update(sha256(enc(prompt)));
    ByteBuffer out = ByteBuffer.wrap(sha.digest());
    return new PromptFingerprint(out.getLong(), out.getLong());
  }

  /** {@code enc(value)} of a value hashed as a whole (a member's value in the fingerprint). */
  static byte[] enc(Object value) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    enc(value, 0, out);
    return out.toByteArray();
  }

  /** {@code enclosing}: the objects of the hashed value this one is nested in. */
  private static void enc(Object v, int enclosing, ByteArrayOutputStream out) {
    if (v instanceof String s) {
      bytes(out, 's', utf8(s));
    } else if (v instanceof BigInteger n) {
      if (n.bitLength() < 64) {
        out.write('i');
        long l = n.longValue();
        varint(out, l << 1 ^ l >> 63);
      } else {
        bytes(out, 'I', n.toByteArray());
      }
    } else if (v instanceof Double d) {
      if (d == Math.rint(d) && !d.isInfinite()) {
        enc(new BigDecimal(d).toBigIntegerExact(), enclosing, out);
      } else {
        out.write('d');
        out.writeBytes(ByteBuffer.allocate(8).putLong(Double.doubleToLongBits(d)).array());
      }
    } else if (v instanceof Boolean b) {
      out.write(b ? 't' : 'f');
    } else if (v == NULL) {
      out.write('n');
    } else if (v instanceof Arr a) {
      out.write('A');
      for (Object item : a.items()) {
        enc(item, enclosing, out);
      }
      out.write(']');
    } else {
      object((Obj) v, enclosing + 1, out);
    }
  }

  private static void object(Obj o, int depth, ByteArrayOutputStream out) {
    List<byte[]> reps = new ArrayList<>();
    int total = 0;
    for (Member m : o.members()) {
      byte[] name = name(m.name());
      byte[] value = encAt(m.value(), depth);
      byte[] rep = depth > CanonicalHasher.SORT_MAX_DEPTH ? concat(name, value) : concat(part(name), part(value));
      reps.add(rep);
      total += rep.length;
    }
    if (depth <= CanonicalHasher.SORT_MAX_DEPTH
        && reps.size() <= CanonicalHasher.SORT_MAX_MEMBERS
        && total <= CanonicalHasher.SORT_MAX_BYTES) {
      reps.sort(Arrays::compareUnsigned);
      out.write('O');
      reps.forEach(out::writeBytes);
      out.write('}');
      return;
    }
    long[] lanes = new long[4];
    for (byte[] rep : reps) {
      ByteBuffer d = ByteBuffer.wrap(sha256(rep));
      for (int i = 0; i < 4; i++) {
        lanes[i] += d.getLong();
      }
    }
    out.write(depth > CanonicalHasher.SORT_MAX_DEPTH ? 'D' : 'L');
    varint(out, reps.size());
    ByteBuffer b = ByteBuffer.allocate(32);
    for (long lane : lanes) {
      b.putLong(lane);
    }
    out.writeBytes(b.array());
  }

  private static byte[] encAt(Object v, int enclosing) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    enc(v, enclosing, out);
    return out.toByteArray();
  }

  /** A member's representation: its name's and its value's encodings, or each one's digest when long. */
  static byte[] representation(String name, Object value) {
    return concat(part(name(name)), part(encAt(value, 1)));
  }

  static byte[] name(String name) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    bytes(out, 'k', utf8(name));
    return out.toByteArray();
  }

  private static byte[] part(byte[] encoding) {
    if (encoding.length <= CanonicalHasher.INLINE_MAX) {
      return encoding;
    }
    byte[] h = new byte[33];
    h[0] = 'H';
    System.arraycopy(sha256(encoding), 0, h, 1, 32);
    return h;
  }

  /** UTF-8, a lone surrogate as its three-byte form (String.getBytes would replace it). */
  static byte[] utf8(String s) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    s.codePoints().forEach(cp -> {
      if (cp < 0x80) {
        out.write(cp);
      } else if (cp < 0x800) {
        out.write(0xc0 | cp >> 6);
        out.write(0x80 | cp & 0x3f);
      } else if (cp < 0x10000) {
        out.write(0xe0 | cp >> 12);
        out.write(0x80 | cp >> 6 & 0x3f);
        out.write(0x80 | cp & 0x3f);
      } else {
        out.write(0xf0 | cp >> 18);
        out.write(0x80 | cp >> 12 & 0x3f);
        out.write(0x80 | cp >> 6 & 0x3f);
        out.write(0x80 | cp & 0x3f);
      }
    });
    return out.toByteArray();
  }

  private static void bytes(ByteArrayOutputStream out, char tag, byte[] payload) {
    out.write(tag);
    varint(out, payload.length);
    out.writeBytes(payload);
  }

  private static void varint(ByteArrayOutputStream out, long v) {
    while ((v & ~0x7fL) != 0) {
      out.write((int) (v & 0x7f | 0x80));
      v >>>= 7;
    }
    out.write((int) v);
  }

  private static byte[] concat(byte[] a, byte[] b) {
    byte[] c = Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, c, a.length, b.length);
    return c;
  }

  static byte[] sha256(byte[] b) {
    return CanonicalHasher.sha256().digest(b);
  }

  /** A string whose encoding ({@code 's'}, length, UTF-8) is exactly {@code bytes} long (ASCII). */
  static String stringOfEncodedLength(int bytes, char fill) {
    int n = bytes - 2;
    if (n >= 128) {
      n--; // a two-byte length
    }
    return String.valueOf(fill).repeat(n);
  }

  // ---------------------------------------------------------------------------------------------
  // JSON spellings

  /** The body {@code {"model": model, "prompt": prompt}}, plainly ({@code spelling} null) or re-spelled. */
  static String body(String model, Object prompt, Random spelling) {
    List<Member> members = new ArrayList<>();
    if (model != null) {
      members.add(new Member("model", model));
    }
    members.add(new Member("prompt", prompt));
    if (spelling != null) {
      members.add(new Member("max_tokens", integer(spelling.nextInt(100))));
    }
    StringBuilder b = new StringBuilder();
    write(new Obj(members), spelling, b);
    return b.toString();
  }

  /**
   * JSON text of {@code v}: compact with members in order and minimal escapes ({@code r} null), or
   * with every object's members shuffled, random whitespace, random escapes and random number
   * spellings of the same value.
   */
  static void write(Object v, Random r, StringBuilder b) {
    space(r, b);
    if (v instanceof String s) {
      string(s, false, r, b);
    } else if (v instanceof BigInteger n) {
      b.append(spellInteger(n, r));
    } else if (v instanceof Double d) {
      b.append(spellDouble(d, r));
    } else if (v instanceof Boolean || v == NULL) {
      b.append(v);
    } else if (v instanceof Arr a) {
      b.append('[');
      for (int i = 0; i < a.items().size(); i++) {
        b.append(i == 0 ? "" : ",");
        write(a.items().get(i), r, b);
      }
      space(r, b);
      b.append(']');
    } else {
      List<Member> members = new ArrayList<>(((Obj) v).members());
      if (r != null) {
        Collections.shuffle(members, r);
      }
      b.append('{');
      for (int i = 0; i < members.size(); i++) {
        b.append(i == 0 ? "" : ",");
        space(r, b);
        string(members.get(i).name(), true, r, b);
        space(r, b);
        b.append(':');
        write(members.get(i).value(), r, b);
      }
      space(r, b);
      b.append('}');
    }
    space(r, b);
  }

  private static void space(Random r, StringBuilder b) {
    if (r != null && r.nextInt(4) == 0) {
      b.append(" \t\n\r".charAt(r.nextInt(4)));
    }
  }

  private static void string(String s, boolean name, Random r, StringBuilder b) {
    b.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      boolean pair = Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1));
      if (Character.isSurrogate(c) && !pair) {
        b.append(String.format("\\u%04x", (int) c)); // a lone surrogate has no UTF-8 of its own
      } else if (r != null && r.nextInt(5) == 0 && !(name && pair)) {
        // Not an escaped pair in a name: Jackson's non-blocking parser (2.21.3) fails on one cut
        // between its two escapes, with or without the fingerprint (jackson-core#1581).
        String format = r.nextBoolean() ? "\\u%04x" : "\\u%04X";
        b.append(String.format(format, (int) c));
        if (Character.isHighSurrogate(c)) {
          b.append(String.format(format, (int) s.charAt(++i))); // a pair is escaped whole, or not at all
        }
      } else if (Character.isHighSurrogate(c)) {
        b.append(c).append(s.charAt(++i));
      } else if (c == '"' || c == '\\') {
        b.append('\\').append(c);
      } else if (c == '/' && r != null && r.nextBoolean()) {
        b.append("\\/");
      } else if (c == '\n') {
        b.append("\\n");
      } else if (c < 0x20) {
        b.append(String.format("\\u%04x", (int) c));
      } else {
        b.append(c);
      }
    }
    b.append('"');
  }

  private static String spellInteger(BigInteger n, Random r) {
    if (r == null || n.abs().bitLength() > 52) {
      return n.toString(); // beyond 2^53 a fraction or exponent would round it
    }
    return switch (r.nextInt(6)) {
      case 0 -> n + ".0";
      case 1 -> n + (r.nextBoolean() ? "e0" : "E+0");
      case 2 -> n.multiply(BigInteger.TEN) + "e-1";
      case 3 -> n.signum() == 0 ? "-0.0" : new BigDecimal(n).movePointLeft(2).toPlainString() + "E2";
      default -> n.toString();
    };
  }

  private static String spellDouble(double d, Random r) {
    if (r == null) {
      return Double.toString(d);
    }
    return switch (r.nextInt(3)) {
      case 0 -> new BigDecimal(d).toPlainString(); // exact: parses back to d
      case 1 -> new BigDecimal(d).toString().toLowerCase(Locale.ROOT);
      default -> Double.toString(d);
    };
  }

  // ---------------------------------------------------------------------------------------------
  // Random values

  /** Text from a small alphabet with escapes-worth characters, a surrogate pair and a two-byte one. */
  static String text(Random r, int length) {
    String alphabet = "ab c\"\\/\n\té€😀<&>\u0000";
    StringBuilder s = new StringBuilder();
    while (s.length() < length) {
      s.appendCodePoint(alphabet.codePointAt(alphabet.offsetByCodePoints(0, r.nextInt(alphabet.codePointCount(0, alphabet.length())))));
    }
    return s.toString();
  }

  /** A random value with at most {@code depth} nested containers; now and then near or past a bound. */
  static Object value(Random r, int depth) {
    int kind = r.nextInt(depth > 0 ? 10 : 6);
    return switch (kind) {
      case 0 -> text(r, switch (r.nextInt(6)) {
        case 0 -> 100 + r.nextInt(60); // around INLINE_MAX
        case 1 -> 200 + r.nextInt(200);
        default -> r.nextInt(12);
      });
      case 1 -> switch (r.nextInt(5)) {
        case 0 -> integer(r.nextLong());
        case 1 -> BigInteger.ONE.shiftLeft(63 + r.nextInt(2)).subtract(integer(r.nextInt(3))); // uint64 range
        default -> integer(r.nextInt(2001) - 1000);
      };
      case 2 -> r.nextInt(4) == 0 ? (double) (r.nextInt(2000) - 1000) : r.nextGaussian() * Math.pow(10, r.nextInt(20) - 10);
      case 3 -> r.nextBoolean();
      case 4 -> NULL;
      case 5 -> text(r, r.nextInt(4));
      case 6, 7 -> {
        List<Object> items = new ArrayList<>();
        for (int i = 0, n = r.nextInt(5); i < n; i++) {
          items.add(value(r, depth - 1));
        }
        yield new Arr(items);
      }
      default -> {
        int shape = r.nextInt(10);
        int n = switch (shape) {
          case 0 -> CanonicalHasher.SORT_MAX_MEMBERS - 2 + r.nextInt(5); // around the member count
          case 1 -> 20 + r.nextInt(20); // long values: around the byte total
          default -> r.nextInt(6);
        };
        List<Member> members = new ArrayList<>();
        for (int i = 0; i < n; i++) {
          String name = r.nextInt(10) == 0 && i > 0 ? members.get(r.nextInt(i)).name() // a duplicate
              : r.nextInt(15) == 0 ? text(r, 120 + r.nextInt(20)) : text(r, 1 + r.nextInt(6));
          Object value = shape == 1 ? text(r, 70 + r.nextInt(60)) : value(r, n > 8 ? 0 : depth - 1);
          members.add(new Member(name, value));
        }
        yield new Obj(members);
      }
    };
  }

  /** {@code v} inside {@code depth} objects, each with a sibling member or two and an array now and then. */
  static Object nest(Object v, int depth, Random r) {
    for (int i = 0; i < depth; i++) {
      Object inner = r.nextInt(3) == 0 ? arr(v) : v;
      v = r.nextBoolean() ? obj("v", inner, "i", integer(i)) : obj("s", text(r, 3), "v", inner, "t", true);
    }
    return v;
  }

  /** The forms of the objects in {@code v}: {@code 'O'}, {@code 'L'}, {@code 'D'}. */
  static java.util.Set<Character> forms(Object v) {
    java.util.Set<Character> forms = new java.util.TreeSet<>();
    forms(v, 0, forms);
    return forms;
  }

  private static void forms(Object v, int enclosing, java.util.Set<Character> out) {
    if (v instanceof Arr a) {
      a.items().forEach(item -> forms(item, enclosing, out));
    } else if (v instanceof Obj o) {
      ByteArrayOutputStream b = new ByteArrayOutputStream();
      object(o, enclosing + 1, b);
      out.add((char) b.toByteArray()[0]);
      o.members().forEach(m -> forms(m.value(), enclosing + 1, out));
    }
  }

  /** {@code v} with one leaf changed: a different value. */
  static Object mutate(Object v, Random r) {
    if (v instanceof Arr a && !a.items().isEmpty()) {
      List<Object> items = new ArrayList<>(a.items());
      int i = r.nextInt(items.size());
      items.set(i, mutate(items.get(i), r));
      return new Arr(items);
    }
    if (v instanceof Obj o && !o.members().isEmpty()) {
      List<Member> members = new ArrayList<>(o.members());
      int i = r.nextInt(members.size());
      Member m = members.get(i);
      members.set(i, r.nextInt(4) == 0 ? new Member(m.name() + "x", m.value()) : new Member(m.name(), mutate(m.value(), r)));
      return new Obj(members);
    }
    if (v instanceof Arr) {
      return arr(NULL);
    }
    if (v instanceof Obj) {
      return obj("", NULL);
    }
    if (v instanceof String s) {
      return s + "x";
    }
    if (v instanceof BigInteger n) {
      return n.add(BigInteger.ONE);
    }
    if (v instanceof Double d) {
      return d + 1.5;
    }
    if (v instanceof Boolean b) {
      return !b;
    }
    return "null";
  }
}
