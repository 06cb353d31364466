package io.disaggusage.extproc.classify;

import static io.disaggusage.extproc.classify.CanonicalHasher.INLINE_MAX;
import static io.disaggusage.extproc.classify.CanonicalHasher.SORT_MAX_BYTES;
import static io.disaggusage.extproc.classify.CanonicalHasher.SORT_MAX_DEPTH;
import static io.disaggusage.extproc.classify.CanonicalHasher.SORT_MAX_MEMBERS;
import static io.disaggusage.extproc.classify.CanonicalReference.NULL;
import static io.disaggusage.extproc.classify.CanonicalReference.arr;
import static io.disaggusage.extproc.classify.CanonicalReference.body;
import static io.disaggusage.extproc.classify.CanonicalReference.integer;
import static io.disaggusage.extproc.classify.CanonicalReference.obj;
import static io.disaggusage.extproc.classify.PromptFingerprintTest.json;
import static io.disaggusage.extproc.classify.PromptFingerprintTest.msgpack;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.classify.CanonicalReference.Member;
import io.disaggusage.extproc.classify.CanonicalReference.Obj;
import io.disaggusage.extproc.testkit.MsgpackBodies;
import io.disaggusage.extproc.testkit.MsgpackBodies.Style;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The canonical form's bounds (CanonicalHasher): objects at and beyond the sorted form's member
 * count, byte total and nesting depth, names and values at and beyond the inline length, each
 * matching {@link CanonicalReference} (the form as documented, computed from the whole value) in
 * every member order, spelling and encoding.
 */
class PromptFingerprintFormTest {

  @Test
  void smallObjectsAgreeInEveryMemberOrder() {
    List<Member> members = List.of(
        new Member("role", "user"),
        new Member("content", "long ".repeat(60)), // past INLINE_MAX: its digest
        new Member("n".repeat(INLINE_MAX + 5), integer(1)), // a long name: its digest
        new Member("o", obj("b", integer(1), "a", arr(integer(1), integer(2)), "c", NULL)),
        new Member("e", arr()));
    Object first = new Obj(members);
    PromptFingerprint expected = CanonicalReference.fingerprint("m", first);
    assertThat(form(first)).isEqualTo('O');
    List<List<Member>> orders = new ArrayList<>();
    permutations(new ArrayList<>(members), 0, orders);
    assertThat(orders).hasSize(120);
    List<List<Member>> inner = new ArrayList<>();
    permutations(new ArrayList<>(((Obj) members.get(3).value()).members()), 0, inner);
    int k = 0;
    for (List<Member> order : orders) {
      List<Member> m = new ArrayList<>(order);
      int o = m.indexOf(members.get(3));
      m.set(o, new Member("o", new Obj(inner.get(k++ % inner.size()))));
      String plain = body("m", new Obj(m), null);
      assertThat(json(plain)).as(plain).isEqualTo(expected);
      assertThat(msgpack(MsgpackBodies.fromJson(plain, Style.values()[k % 3]))).as(plain).isEqualTo(expected);
    }
  }

  @Test
  void objectsAtAndBeyondTheMemberCount() {
    for (int n : new int[] {SORT_MAX_MEMBERS - 1, SORT_MAX_MEMBERS, SORT_MAX_MEMBERS + 1, 2 * SORT_MAX_MEMBERS + 3}) {
      List<Member> members = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        members.add(new Member("k" + i, i % 3 == 0 ? "v" + i : integer(i)));
      }
      Obj o = new Obj(members);
      assertThat(form(o)).as("%d members", n).isEqualTo(n <= SORT_MAX_MEMBERS ? 'O' : 'L');
      assertCanonical(o);
      assertCanonical(reversed(o));
      assertDifferent(o, CanonicalReference.mutate(o, new Random(n)));
      List<Member> fewer = new ArrayList<>(members);
      fewer.remove(n / 2);
      assertDifferent(o, new Obj(fewer));
      List<Member> duplicated = new ArrayList<>(members);
      duplicated.add(members.get(n / 3));
      assertDifferent(o, new Obj(duplicated)); // a duplicate counts, in either form
    }
  }

  @Test
  void namesAndValuesAtAndBeyondTheInlineLength() {
    for (int bytes : new int[] {INLINE_MAX - 1, INLINE_MAX, INLINE_MAX + 1, 2 * INLINE_MAX}) {
      Object value = sized(bytes, 'v');
      Obj byValue = obj("a", value, "z", integer(1), "m", "x");
      Obj byName = obj(sized(bytes, 'n'), "x", "z", integer(1));
      assertThat(CanonicalReference.name(sized(bytes, 'n'))).hasSize(bytes);
      // A container value: an array of one-byte integers ('i' and its zigzag byte each).
      Object array = arrayOf(bytes);
      Obj byArray = obj("a", array, "b", obj("c", array));
      int representation = CanonicalReference.representation("a", value).length;
      assertThat(representation).isEqualTo(bytes <= INLINE_MAX ? 2 + 1 + bytes : 2 + 1 + 33);
      assertThat(CanonicalReference.enc(array)).hasSize(bytes);
      for (Obj o : List.of(byValue, byName, byArray)) {
        assertThat(form(o)).isEqualTo('O');
        assertCanonical(o);
        assertCanonical(reversed(o));
        // the same members in the lane form (past the member count) and in the deep form
        assertCanonical(padded(o, SORT_MAX_MEMBERS));
        assertCanonical(nested(o, SORT_MAX_DEPTH + 1));
      }
      assertDifferent(byValue, obj("a", sized(bytes, 'w'), "z", integer(1), "m", "x"));
      assertDifferent(byValue, obj("a", sized(bytes - 1, 'v'), "z", integer(1), "m", "x"));
      assertDifferent(byName, obj(sized(bytes, 'o'), "x", "z", integer(1)));
    }
  }

  @Test
  void objectsAtAndBeyondTheByteTotal() {
    for (int total : new int[] {SORT_MAX_BYTES - 1, SORT_MAX_BYTES, SORT_MAX_BYTES + 1}) {
      Obj o = ofTotal(total, 'v');
      int sum = 0;
      for (Member m : o.members()) {
        sum += CanonicalReference.representation(m.name(), m.value()).length;
      }
      assertThat(sum).isEqualTo(total);
      assertThat(form(o)).as("%d bytes", total).isEqualTo(total <= SORT_MAX_BYTES ? 'O' : 'L');
      assertCanonical(o);
      assertCanonical(reversed(o));
      assertDifferent(o, ofTotal(total, 'w'));
    }
  }

  @Test
  void objectsAtAndBeyondTheNestingDepth() {
    for (int depth : new int[] {SORT_MAX_DEPTH - 1, SORT_MAX_DEPTH, SORT_MAX_DEPTH + 1, SORT_MAX_DEPTH + 4, 300}) {
      Object chain = chain(depth, "leaf");
      assertCanonical(chain);
      assertDifferent(chain, chain(depth, "leaf2"));
      assertDifferent(chain, chain(depth + 1, "leaf"));
    }
    // The deep form, and a sorted-form object under it, agree in every order as well.
    Object deep = nested(obj("a", integer(1), "b", obj("c", NULL, "d", arr(obj("e", "f", "g", "h")))), SORT_MAX_DEPTH + 2);
    assertCanonical(deep);
  }

  /** One object small enough to be sorted and the same object grown past a bound: each agrees in every order. */
  @Test
  void bufferedAndBeyondTheBoundFormsOfOneObject() {
    Obj small = obj("role", "user", "content", "q", "name", "n");
    Obj manyMembers = padded(small, SORT_MAX_MEMBERS);
    Obj manyBytes = new Obj(concat(small.members(), ofTotal(SORT_MAX_BYTES, 'p').members()));
    Obj longValue = obj("role", "user", "content", sized(INLINE_MAX + 1, 'q'), "name", "n");
    assertThat(form(small)).isEqualTo('O');
    assertThat(form(manyMembers)).isEqualTo('L');
    assertThat(form(manyBytes)).isEqualTo('L');
    assertThat(form(longValue)).isEqualTo('O');
    List<Obj> all = List.of(small, manyMembers, manyBytes, longValue);
    for (Obj o : all) {
      assertCanonical(o);
      assertCanonical(reversed(o));
      for (Obj other : all) {
        if (other != o) {
          assertDifferent(o, other);
        }
      }
    }
    // As elements of one array, in both orders: sorted and lane forms side by side.
    assertCanonical(arr(small, manyMembers, manyBytes, longValue));
    assertDifferent(arr(small, manyMembers), arr(manyMembers, small));
  }

  /**
   * Strings longer than the JSON reader joins into one array are hashed from the parser's segments:
   * a surrogate pair cut between two segments, and lone surrogates, are encoded as in a short string.
   */
  @Test
  void longStringsFromTheParsersSegments() {
    Random r = new Random(7);
    for (int length : new int[] {4095, 4097, 10_001, 70_000}) {
      for (String unit : new String[] {"😀", "a😀", "é€😀x\n\"", "\ud800a", "b\udc00", "\ud800\ud800\ude00"}) {
        String s = unit.repeat(length / unit.length() + 1).substring(0, length);
        Object value = arr(s, obj("k", s, "a", integer(1)), s + "z");
        PromptFingerprint expected = CanonicalReference.fingerprint("m", value);
        String body = body("m", value, null);
        assertThat(json(body)).as("%s × %d", unit, length).isEqualTo(expected);
        assertThat(json(body("m", value, r))).as("%s × %d re-spelled", unit, length).isEqualTo(expected);
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        for (int i = 0; i < 40; i++) {
          int cut = r.nextInt(b.length);
          assertThat(json(b, cut)).as("%s × %d split at %d", unit, length, cut).isEqualTo(expected);
        }
        if (s.codePoints().noneMatch(c -> Character.isSurrogate((char) c))) { // MessagePack strings are valid UTF-8
          assertThat(msgpack(MsgpackBodies.fromJson(body, Style.COMPACT))).isEqualTo(expected);
        }
      }
    }
    assertDifferent(arr("\ud800".repeat(5000)), arr("\ufffd".repeat(5000)));
  }

  @Test
  void messagePackBinaryAndExtensionValuesAreOrderIndependentAndDistinct() {
    byte[] data = "bytes".repeat(40).getBytes(StandardCharsets.UTF_8); // past INLINE_MAX
    byte[] binFirst = binAndExt(data, true, (byte) 5, false);
    byte[] extFirst = binAndExt(data, false, (byte) 5, false);
    PromptFingerprint whole = msgpack(binFirst);
    assertThat(whole).isNotNull();
    for (byte[] b : List.of(binFirst, extFirst)) {
      for (int i = 0; i <= b.length; i++) {
        assertThat(msgpack(b, i)).as("split at %d", i).isEqualTo(whole);
      }
    }
    byte[] otherType = binAndExt(data, true, (byte) 6, false);
    byte[] strNotBin = binAndExt(data, true, (byte) 5, true);
    assertThat(msgpack(otherType)).isNotNull().isNotEqualTo(whole);
    assertThat(msgpack(strNotBin)).isNotNull().isNotEqualTo(whole);
  }

  // ---------------------------------------------------------------------------------------------

  /**
   * The body {@code {"model":"m","prompt":v}} in every spelling — plain, re-spelled with members
   * shuffled (three ways), MessagePack of each style — and cut at every split of the plain and the
   * MessagePack bodies: always the reference fingerprint.
   */
  static void assertCanonical(Object v) {
    PromptFingerprint expected = CanonicalReference.fingerprint("m", v);
    byte[] plain = body("m", v, null).getBytes(StandardCharsets.UTF_8);
    assertThat(json(plain)).as("%s", v).isEqualTo(expected);
    for (int seed = 0; seed < 3; seed++) {
      String respelled = body("m", v, new Random(seed));
      assertThat(json(respelled)).as(respelled).isEqualTo(expected);
      assertThat(msgpack(MsgpackBodies.fromJson(respelled, Style.values()[seed]))).as("%s %s", Style.values()[seed], respelled)
          .isEqualTo(expected);
    }
    int step = Math.max(1, plain.length / 600); // every split of small bodies; a spread of them in large ones
    for (int i = step / 2; i <= plain.length; i += step) {
      assertThat(json(plain, i)).as("split at %d", i).isEqualTo(expected);
    }
    byte[] packed = MsgpackBodies.fromJson(plain, Style.COMPACT);
    step = Math.max(1, packed.length / 600);
    for (int i = step / 2; i <= packed.length; i += step) {
      assertThat(msgpack(packed, i)).as("msgpack split at %d", i).isEqualTo(expected);
    }
  }

  static void assertDifferent(Object a, Object b) {
    PromptFingerprint fa = json(body("m", a, null));
    assertThat(fa).isNotNull().isEqualTo(CanonicalReference.fingerprint("m", a));
    assertThat(json(body("m", b, new Random(1)))).isNotNull().isNotEqualTo(fa);
  }

  /** The form of {@code v}'s encoding: its tag. */
  private static char form(Object v) {
    return (char) CanonicalReference.enc(v)[0];
  }

  /** A string whose encoding (as a value or, tagged {@code 'k'}, as a name) is exactly {@code bytes} long. */
  private static String sized(int bytes, char fill) {
    String s = CanonicalReference.stringOfEncodedLength(bytes, fill);
    assertThat(CanonicalReference.enc(s)).hasSize(bytes);
    return s;
  }

  /** An array whose encoding is exactly {@code bytes} long (even or odd). */
  private static Object arrayOf(int bytes) {
    List<Object> items = new ArrayList<>();
    int n = 2; // 'A' and ']'
    if (bytes % 2 == 1) {
      items.add(integer(100)); // zigzag 200: two varint bytes
      n += 3;
    }
    while (n < bytes) {
      items.add(integer(items.size() % 50));
      n += 2;
    }
    return new CanonicalReference.Arr(items);
  }

  /** An object whose members' representations total exactly {@code total} bytes. */
  private static Obj ofTotal(int total, char fill) {
    List<Member> members = new ArrayList<>();
    int left = total;
    for (int i = 0; left > 0; i++) {
      String name = String.format("a%02d", i); // encoded in 5 bytes
      int value = Math.min(INLINE_MAX, left - 5);
      if (left - 5 - value > 0 && left - 5 - value < 7) {
        value -= 7; // leave enough for one more member
      }
      members.add(new Member(name, sized(value, fill)));
      left -= 5 + value;
    }
    return new Obj(members);
  }

  /** {@code o} with members added to {@code atLeast} + 1: past the member count. */
  private static Obj padded(Obj o, int atLeast) {
    List<Member> members = new ArrayList<>(o.members());
    for (int i = 0; members.size() <= atLeast; i++) {
      members.add(new Member("pad" + i, integer(i)));
    }
    return new Obj(members);
  }

  /** {@code v} as the innermost of {@code depth} nested objects, an array between every other two. */
  private static Object nested(Object v, int depth) {
    Object inner = v;
    for (int i = 1; i < depth; i++) {
      inner = obj("x" + i, i % 2 == 0 ? arr(inner) : inner, "y", integer(i));
    }
    return inner;
  }

  /** {@code depth} nested objects of three members each, {@code leaf} innermost. */
  private static Object chain(int depth, String leaf) {
    Object inner = leaf;
    for (int i = 0; i < depth; i++) {
      inner = obj("b", integer(i), "a", i % 3 == 0 ? arr(inner, integer(i)) : inner, "c", "x");
    }
    return inner;
  }

  private static Obj reversed(Obj o) {
    List<Member> members = new ArrayList<>(o.members());
    Collections.reverse(members);
    return new Obj(members);
  }

  private static List<Member> concat(List<Member> a, List<Member> b) {
    List<Member> c = new ArrayList<>(a);
    c.addAll(b);
    return c;
  }

  private static <T> void permutations(List<T> items, int from, List<List<T>> out) {
    if (from == items.size()) {
      out.add(List.copyOf(items));
      return;
    }
    for (int i = from; i < items.size(); i++) {
      Collections.swap(items, from, i);
      permutations(items, from + 1, out);
      Collections.swap(items, from, i);
    }
  }

  /** {@code {"model":"m","prompt":{"bin":<3 bytes>,"ext":<data as an ext value>}}} in MessagePack. */
  private static byte[] binAndExt(byte[] data, boolean binFirst, byte extType, boolean binAsString) {
    MsgpackBodies.Packing bin = p -> {
      p.packString("bin");
      if (binAsString) {
        p.packRawStringHeader(3);
      } else {
        p.packBinaryHeader(3);
      }
      p.writePayload(data, 0, 3);
    };
    MsgpackBodies.Packing ext = p -> p.packString("ext").packExtensionTypeHeader(extType, data.length).writePayload(data);
    return packed(p -> {
      p.packMapHeader(2);
      (binFirst ? bin : ext).write(p);
      (binFirst ? ext : bin).write(p);
    });
  }

  /** {@code {"model":"m","prompt":<what prompt writes>}} in MessagePack. */
  private static byte[] packed(MsgpackBodies.Packing prompt) {
    return MsgpackBodies.pack(p -> {
      p.packMapHeader(2).packString("model").packString("m").packString("prompt");
      prompt.write(p);
    });
  }
}
