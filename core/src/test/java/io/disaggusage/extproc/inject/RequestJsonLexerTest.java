package io.disaggusage.extproc.inject;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.json.JsonMapper;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The request lexer agrees with a strict Jackson parse on what is valid JSON, for generated documents
 * and for every one of them with one byte changed, inserted or removed; and it reports the members and
 * values the rewrite relies on at the right offsets.
 */
class RequestJsonLexerTest {
  static final JsonMapper JACKSON =
      JsonMapper.builder().enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS).build();
  static final byte[] INTERESTING = "{}[]\":,\\ \t\n-+.eE0159tfnulrsa/bu\u0001".getBytes(StandardCharsets.ISO_8859_1);

  static boolean lexerValid(byte[] doc) {
    RequestJsonLexer lexer = new RequestJsonLexer(new Recorder());
    for (int i = 0; i < doc.length; i++) {
      if (!lexer.feed(doc[i], i)) {
        return false;
      }
    }
    return lexer.end();
  }

  static boolean jacksonValid(byte[] doc) {
    try {
      var tree = JACKSON.readTree(doc);
      return tree != null && !tree.isMissingNode();
    } catch (Exception e) {
      return false;
    }
  }

  @Test
  void agreesWithJacksonOnGeneratedDocumentsAndTheirOneByteMutations() {
    Random rnd = new Random(20260601);
    int checked = 0;
    for (int n = 0; n < 1500; n++) {
      byte[] doc = generate(rnd).getBytes(StandardCharsets.UTF_8);
      assertThat(lexerValid(doc)).as(new String(doc, StandardCharsets.UTF_8)).isTrue();
      assertThat(jacksonValid(doc)).isTrue();
      for (int m = 0; m < 12; m++) {
        byte[] mutated = mutate(doc, rnd);
        if (!utf8(mutated)) {
          continue; // not validated by the lexer by design (see its class comment)
        }
        assertThat(lexerValid(mutated))
            .as("%s", new String(mutated, StandardCharsets.ISO_8859_1))
            .isEqualTo(jacksonValid(mutated));
        checked++;
      }
    }
    assertThat(checked).isGreaterThan(15_000);
  }

  @Test
  void loneSurrogateEscapesAreAcceptedAsPythonDoes() {
    assertThat(lexerValid("{\"\\ud800\":\"\\udc00\"}".getBytes(StandardCharsets.UTF_8))).isTrue();
  }

  static boolean utf8(byte[] bytes) {
    try {
      StandardCharsets.UTF_8.newDecoder().decode(java.nio.ByteBuffer.wrap(bytes));
      return true;
    } catch (java.nio.charset.CharacterCodingException e) {
      return false;
    }
  }

  @Test
  void edgeCasesAgreeWithJackson() {
    for (String doc :
        List.of("", " ", "{}", "[]", "0", "-0", "-", "01", "1.", "1.5e", "1E+2", ".5", "+1", "tru", "truex", "nul",
            "\"\\u12\"", "\"\\u12G4\"", "\"\\/\"", "\"\\'\"", "{\"a\"}", "{\"a\":}", "{,}", "[,1]", "[1,]", "[1 2]",
            "{\"a\":1}{", "{\"a\":1} ", "\"a\" \"b\"", "[" .repeat(1000) + "]".repeat(1000),
            "[".repeat(1001) + "]".repeat(1001), "\"\u007f\"", "{\"a\":[1,{\"b\":null}]}")) {
      byte[] bytes = doc.getBytes(StandardCharsets.UTF_8);
      assertThat(lexerValid(bytes)).as(doc.length() > 60 ? doc.substring(0, 60) : doc).isEqualTo(jacksonValid(bytes));
    }
  }

  @Test
  void reportsTopTwoLevelMemberNamesDecodedAndValuePositions() {
    String doc = "{\"a\\u0062\":{\"c\":[true,{\"deep\":1}]},\"" + "n".repeat(40) + "\":null,\"é\":2}";
    Recorder recorder = new Recorder();
    List<String> events = recorder.events;
    RequestJsonLexer lexer = new RequestJsonLexer(recorder);
    byte[] bytes = doc.getBytes(StandardCharsets.UTF_8);
    for (int i = 0; i < bytes.length; i++) {
      assertThat(lexer.feed(bytes[i], i)).isTrue();
    }
    assertThat(lexer.end()).isTrue();
    assertThat(events).containsExactly(
        "start 0 { @0",
        "name 1 ab",
        "start 1 { @11",
        "name 2 c",
        "start 2 [ @16",
        "start 3 t @17",
        "literal 3 t end 21",
        "start 3 { @22",
        "start 4 1 @30",
        "close 3 @31",
        "close 2 @32",
        "close 1 @33",
        "name 1 null",
        "start 1 n @78",
        "literal 1 n end 82",
        "name 1 null",
        "start 1 2 @88",
        "close 0 @89");
  }

  // ---------------------------------------------------------------------------------------------

  static String generate(Random rnd) {
    StringBuilder sb = new StringBuilder();
    value(sb, rnd, 0);
    return sb.toString();
  }

  static void value(StringBuilder sb, Random rnd, int depth) {
    ws(sb, rnd);
    int kind = depth > 4 ? 2 + rnd.nextInt(4) : rnd.nextInt(6);
    switch (kind) {
      case 0 -> {
        sb.append('{');
        int n = rnd.nextInt(4);
        for (int i = 0; i < n; i++) {
          if (i > 0) {
            sb.append(',');
          }
          ws(sb, rnd);
          string(sb, rnd);
          ws(sb, rnd);
          sb.append(':');
          value(sb, rnd, depth + 1);
        }
        ws(sb, rnd);
        sb.append('}');
      }
      case 1 -> {
        sb.append('[');
        int n = rnd.nextInt(4);
        for (int i = 0; i < n; i++) {
          if (i > 0) {
            sb.append(',');
          }
          value(sb, rnd, depth + 1);
        }
        ws(sb, rnd);
        sb.append(']');
      }
      case 2 -> string(sb, rnd);
      case 3 -> sb.append(new String[] {"0", "-0", "12", "-3.25", "1e9", "2E-3", "6.02e+23", "9223372036854775808"}[rnd.nextInt(8)]);
      case 4 -> sb.append(new String[] {"true", "false", "null"}[rnd.nextInt(3)]);
      default -> sb.append("\"stream_options\"");
    }
    ws(sb, rnd);
  }

  static void string(StringBuilder sb, Random rnd) {
    String[] parts = {"a", "stream", "\\\"", "\\\\", "\\/", "\\n", "\\u00e9", "\\u20AC", "é", "😀", " ", "{", "]", ":"};
    sb.append('"');
    int n = rnd.nextInt(5);
    for (int i = 0; i < n; i++) {
      sb.append(parts[rnd.nextInt(parts.length)]);
    }
    sb.append('"');
  }

  static void ws(StringBuilder sb, Random rnd) {
    if (rnd.nextInt(4) == 0) {
      sb.append(new String[] {" ", "\n", "\t", "\r\n", "  "}[rnd.nextInt(5)]);
    }
  }

  static byte[] mutate(byte[] doc, Random rnd) {
    int at = doc.length == 0 ? 0 : rnd.nextInt(doc.length + 1);
    byte b = INTERESTING[rnd.nextInt(INTERESTING.length)];
    ByteArray out = new ByteArray();
    switch (rnd.nextInt(3)) {
      case 0 -> { // replace
        if (at == doc.length) {
          return doc;
        }
        out.add(doc, 0, at).add(b).add(doc, at + 1, doc.length);
      }
      case 1 -> out.add(doc, 0, at).add(b).add(doc, at, doc.length); // insert
      default -> { // delete
        if (at == doc.length) {
          return doc;
        }
        out.add(doc, 0, at).add(doc, at + 1, doc.length);
      }
    }
    return out.bytes();
  }

  static final class ByteArray {
    private final java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();

    ByteArray add(byte[] b, int from, int to) {
      out.write(b, from, to - from);
      return this;
    }

    ByteArray add(byte b) {
      out.write(b);
      return this;
    }

    byte[] bytes() {
      return out.toByteArray();
    }
  }

  /** Writes down every event the lexer reports. */
  static final class Recorder implements RequestJsonLexer.Listener {
    final List<String> events = new ArrayList<>();

    @Override
    public void memberName(int depth, String name) {
      events.add("name " + depth + " " + name);
    }

    @Override
    public void valueStart(int depth, byte first, long pos) {
      events.add("start " + depth + " " + (char) first + " @" + pos);
    }

    @Override
    public void literalEnd(int depth, byte first, long end) {
      events.add("literal " + depth + " " + (char) first + " end " + end);
    }

    @Override
    public void containerEnd(int depth, long pos) {
      events.add("close " + depth + " @" + pos);
    }
  }
}
