package io.disaggusage.extproc.json;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.usage.ApiShapes;
import io.disaggusage.extproc.usage.UsageDocument;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The structural scanner: it must call a document well-formed exactly when the service's blocking
 * Jackson parse does ({@link UsageDocument#parse}), whatever the chunking, and report the usage
 * members where {@code UsageDocument} finds them.
 */
class JsonUsageScannerTest {
  static final JsonFactory JSON = UsageDocument.newFactory(1 << 20);

  /** Text (UTF-8) with {@code <XX>} standing for the raw byte 0xXX. */
  static byte[] b(String text) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    int i = 0;
    while (i < text.length()) {
      int lt = text.indexOf('<', i);
      if (lt >= 0 && lt + 3 < text.length() && text.charAt(lt + 3) == '>' && isHex(text.charAt(lt + 1))
          && isHex(text.charAt(lt + 2))) {
        out.writeBytes(text.substring(i, lt).getBytes(StandardCharsets.UTF_8));
        out.write(Integer.parseInt(text.substring(lt + 1, lt + 3), 16));
        i = lt + 4;
      } else {
        out.writeBytes(text.substring(i).getBytes(StandardCharsets.UTF_8));
        break;
      }
    }
    return out.toByteArray();
  }

  private static boolean isHex(char c) {
    return Character.digit(c, 16) >= 0;
  }

  static boolean jacksonAccepts(byte[] doc) {
    try {
      UsageDocument.parse(JSON, doc);
      return true;
    } catch (UsageDocument.MalformedException e) {
      return false;
    }
  }

  /** Scans {@code doc} in chunks of {@code chunk} bytes; events as "KIND@absoluteIndex", then the verdict. */
  static List<String> scan(byte[] doc, int chunk) {
    JsonUsageScanner s = new JsonUsageScanner(ApiShapes.usageContainers());
    List<String> events = new ArrayList<>();
    for (int off = 0; off < doc.length; off += chunk) {
      int to = Math.min(doc.length, off + chunk);
      int i = off;
      while (i < to && !s.failed()) {
        i = s.scan(doc, i, to);
        if (s.event() != JsonUsageScanner.Event.NONE) {
          events.add(s.event() + "@" + s.eventIndex());
        }
      }
    }
    events.add(s.complete() && !s.failed() ? "WELL-FORMED" : "MALFORMED");
    return events;
  }

  static Stream<Arguments> verdictCases() {
    String[] cases = {
      "{}", " \t\r\n{ } \n", "{\"a\":1}", "{\"a\":[1,2,{\"b\":null}],\"c\":true,\"d\":false}",
      "<EF><BB><BF>{}", "<EF><BB><BF> {}", " <EF><BB><BF>{}", "<EF><BB>{}", "<EF>{}",
      "", "  ", "[]", "[{}]", "1", "\"x\"", "null", "{} {}", "{}1", "{}<00>", "{} x", "{}}", "{}]", "{\"a\":1}}",
      "{\"a\":1", "{\"a\":", "{\"a\"", "{\"a", "{", "{\"a\":1,}", "{\"a\":[1,]}", "{\"a\":[,1]}", "{,}", "{\"a\" 1}",
      "{\"a\":1 \"b\":2}", "{\"a\":[1 2]}", "{\"a\":[}", "{\"a\":{]}", "{\"a\":{}]}", "{'a':1}", "{a:1}",
      "{/*c*/\"a\":1}", "{#c\n\"a\":1}", "{\"a\":1}//", "{<00>}", "{<7F>}", "{\f}", "{\"a\":1<0B>}",
      // numbers
      "{\"a\":-0}", "{\"a\":-01}", "{\"a\":00}", "{\"a\":0.0e-0}", "{\"a\":0E+1}", "{\"a\":1.}", "{\"a\":.5}",
      "{\"a\":+1}", "{\"a\":-}", "{\"a\":1e}", "{\"a\":1e+}", "{\"a\":NaN}", "{\"a\":-Infinity}", "{\"a\":Infinity}",
      "{\"a\":1x}", "{\"a\":1.5E3}", "{\"a\":-0.0}", "{\"a\":[0123]}", "{\"a\":-a}", "{\"a\":0 1}", "{\"a\":1e5.3}",
      "{\"a\":-.5}", "{\"a\":1.e5}", "{\"a\":1E-7}", "{\"a\":123456789012345678901234567890}", "{\"a\":[-1,0,1]}",
      "{\"a\":0x1F}", "{\"a\":1_000}", "{\"a\":1.5.2}", "{\"a\":--1}", "{\"a\":1e+-2}", "{\"a\":[1,-]}",
      // literals
      "{\"a\":true}", "{\"a\":truex}", "{\"a\":tru}", "{\"a\":nulll}", "{\"a\":True}", "{\"a\":nul}", "{\"a\":fals}",
      "{\"a\":true\"b\":1}", "{\"a\":true<C3><A9>}", "{\"a\":[true,false,null]}", "{\"a\":[truefalse]}",
      // strings and escapes
      "{\"a\":\"\\x\"}", "{\"a\":\"\\u00e9\"}", "{\"a\":\"\\u00E9\"}", "{\"a\":\"\\u00G9\"}", "{\"a\":\"\\u00e\"}",
      "{\"a\":\"\\ud800\"}", "{\"a\":\"\\udc00x\"}", "{\"a\":\"\\/\"}", "{\"a\":\"\\'\"}", "{\"a\":\"\\\"\\\\\\b\\f\\n\\r\\t\"}",
      "{\"a\":\"x}", "{\"a\":\"x", "{\"a\":\"<1F>\"}", "{\"a\":\"<00>\"}", "{\"a\":\"<09>\"}", "{\"a\":\"<7F>\"}",
      "{\"a\":\"\\", "{\"a\":\"\\u12",
      // UTF-8 in values
      "{\"a\":\"<FF>\"}", "{\"a\":\"<80>\"}", "{\"a\":\"<C3>(\"}", "{\"a\":\"<C3>\"}", "{\"a\":\"<C0><80>\"}",
      "{\"a\":\"<C1><BF>\"}", "{\"a\":\"<ED><A0><80>\"}", "{\"a\":\"<E0><80><80>\"}", "{\"a\":\"<F4><90><80><80>\"}",
      "{\"a\":\"<F7><BF><BF><BF>\"}", "{\"a\":\"<F8><88><80><80><80>\"}", "{\"a\":\"<E2><82>\"}", "{\"a\":\"é中😀\"}",
      "{\"a\":1<C2><A0>}", "{<C3><A9>:1}",
      // names
      "{\"<FF>\":1}", "{\"<C0><80>\":1}", "{\"<C3>(\":1}", "{\"<ED><A0><80>\":1}", "{\"<ED><BF><BF>\":1}",
      "{\"<ED><9F><BF>\":1}", "{\"<F4><90><80><80>\":1}", "{\"<E0><80><80>\":1}", "{\"<80>\":1}", "{\"<7F>\":1}",
      "{\"<E2><82>\":1}", "{\"<1F>\":1}", "{\"\\x\":1}", "{\"\\ud800\":1}", "{\"\\udc00\":1}",
      "{\"\\ud800\\u0041\":1}", "{\"\\ud800\\ud800\":1}", "{\"\\ud800x\":1}", "{\"\\ud800\\udc00\":1}",
      "{\"\\ud800\\n\":1}", "{\"\\udbff\\udfff\":1}", "{\"\\u0000\":1}", "{\"<ED><A0><80><ED><B0><80>\":1}",
      "{\"\\ud800<ED><B0><80>\":1}", "{\"x\":{\"\\ud800\":1}}", "{\"x\":[{\"<C3>(\":1}]}", "{\"é\":{\"中\":[\"😀\"]}}",
      // model strings are decoded by the reference parse: UTF-8-encoded surrogates are refused there
      "{\"model\":\"<ED><A0><80>\"}", "{\"model\":\"<C0><80>\"}", "{\"model\":\"\\ud800\"}", "{\"model\":7}",
      "{\"response\":{\"model\":\"<ED><BF><BF>\"}}", "{\"x\":{\"model\":\"<ED><A0><80>\"}}",
      // usage members
      "{\"usage\":{\"prompt_tokens\":1}}", "{\"usage\":null}", "{\"usage\":{}}", "{\"usage\":{\"a\":[{}]},\"usage\":1}",
      "{\"response\":{\"usage\":{\"a\":1},\"x\":{\"usage\":{}}}}", "{\"x\":{\"usage\":{\"a\":1}}}",
      "{\"message\":{\"usage\":{\"a\":1},\"model\":\"<ED><A0><80>\"}}", "{\"message\":{\"usage\":}}",
      "{\"message\":[{\"usage\":{}}],\"messages\":{\"usage\":{}},\"messag\":{\"usage\":{}}}",
    };
    return Stream.of(cases).map(c -> Arguments.of(c));
  }

  @ParameterizedTest(name = "[{index}] {0}")
  @MethodSource("verdictCases")
  void verdictMatchesJacksonWhateverTheChunking(String text) {
    byte[] doc = b(text);
    String expected = jacksonAccepts(doc) ? "WELL-FORMED" : "MALFORMED";
    List<String> whole = scan(doc, Math.max(1, doc.length));
    assertThat(whole.get(whole.size() - 1)).as(text).isEqualTo(expected);
    for (int chunk = 1; chunk < doc.length; chunk++) {
      assertThat(scan(doc, chunk)).as(text + " in chunks of " + chunk).isEqualTo(whole);
    }
  }

  @Test
  void limitsAreJacksonsLimits() {
    String[] cases = {
      "{\"a\":" + "1".repeat(1000) + "}", "{\"a\":" + "1".repeat(1001) + "}",
      "{\"a\":-" + "1".repeat(1000) + "}", "{\"a\":-" + "1".repeat(1001) + "}",
      "{\"a\":" + "1".repeat(999) + ".1}", "{\"a\":" + "1".repeat(1000) + ".1}",
      "{\"a\":0." + "1".repeat(999) + "}", "{\"a\":0." + "1".repeat(1000) + "}",
      "{\"a\":1e+" + "1".repeat(999) + "}", "{\"a\":1e+" + "1".repeat(1000) + "}",
      "{\"a\":" + "1".repeat(500) + "." + "1".repeat(499) + "e1}", "{\"a\":" + "1".repeat(500) + "." + "1".repeat(500) + "e1}",
      "{\"" + "n".repeat(50000) + "\":1}", "{\"" + "n".repeat(50001) + "\":1}",
      "{\"x\":[{\"" + "n".repeat(50001) + "\":1}]}",
      "{\"" + "é".repeat(25000) + "\":1}", "{\"" + "é".repeat(24999) + "aaa\":1}",
      "{\"" + "\\u00e9".repeat(25000) + "\":1}", "{\"" + "\\u00e9".repeat(25001) + "\":1}",
      "{\"" + "\\u0800".repeat(16666) + "\":1}", "{\"" + "\\u0800".repeat(16667) + "\":1}",
      "{\"" + "😀".repeat(12500) + "\":1}", "{\"" + "😀".repeat(12501) + "\":1}",
      "{\"" + "\\uD83D\\uDE00".repeat(12500) + "\":1}", "{\"" + "\\uD83D\\uDE00".repeat(12501) + "\":1}",
      "{\"" + "n".repeat(49999) + "\\\"\":1}", "{\"" + "n".repeat(50000) + "\\\"\":1}",
      "{\"a\":" + "[".repeat(999) + "]".repeat(999) + "}", "{\"a\":" + "[".repeat(1000) + "]".repeat(1000) + "}",
      "{\"a\":" + "{\"b\":".repeat(999) + "1" + "}".repeat(999) + "}",
      "{\"a\":" + "{\"b\":".repeat(1000) + "1" + "}".repeat(1000) + "}",
    };
    for (String text : cases) {
      byte[] doc = text.getBytes(StandardCharsets.UTF_8);
      String expected = jacksonAccepts(doc) ? "WELL-FORMED" : "MALFORMED";
      for (int chunk : new int[] {doc.length, 1, 7, 4096}) {
        List<String> events = scan(doc, chunk);
        assertThat(events.get(events.size() - 1))
            .as("%s… (%d bytes) in chunks of %d", text.substring(0, Math.min(40, text.length())), doc.length, chunk)
            .isEqualTo(expected);
      }
    }
  }

  /** Scanning {@code bytes} in chunks of every size gives the {@code expected} events and verdict. */
  static void assertEveryChunkSize(byte[] bytes, List<String> expected) {
    for (int chunk = 1; chunk <= bytes.length; chunk++) {
      assertThat(scan(bytes, chunk)).as("chunks of %d", chunk).isEqualTo(expected);
    }
  }

  @Test
  void reportsTheUsageMembersUsageDocumentReads() {
    String doc =
        "{\"choices\":[{\"usage\":{\"a\":1}}],\"meta\":{\"usage\":{}},\"text\":\"\\\"usage\\\":{\","
            + "\"\\\"usage\\\"\":{},\"us\\u0061ge\":{\"b\":{\"c\":[1]}},\"usage \":{},\"Usage\":{},"
            + "\"response\":{\"x\":{\"usage\":{}},\"usage\":[{}]},\"usage\":null}";
    byte[] bytes = doc.getBytes(StandardCharsets.UTF_8);
    int escaped = doc.indexOf("{\"b\"");
    int responseUsage = doc.indexOf("[{}]");
    int nullUsage = doc.indexOf("null}");
    List<String> expected =
        List.of(
            "USAGE_OBJECT_START@" + escaped,
            "USAGE_OBJECT_END@" + (doc.indexOf("]}}") + 2),
            "USAGE_OTHER_START@" + responseUsage,
            "USAGE_OTHER_START@" + nullUsage,
            "WELL-FORMED");
    assertEveryChunkSize(bytes, expected);
  }

  @Test
  void usageInsideTheResponseObjectIsAUsageMemberToo() {
    String doc = "{\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"usage\":{\"input_tokens\":1}},\"x\":{\"response\":{\"usage\":{}}}}";
    int start = doc.indexOf("{\"input_tokens\"");
    assertThat(scan(doc.getBytes(StandardCharsets.UTF_8), 3))
        .containsExactly(
            "USAGE_OBJECT_START@" + start, "USAGE_OBJECT_END@" + doc.indexOf("}},"), "WELL-FORMED");
  }

  /** Anthropic {@code message_start}: the usage and model of the root's {@code message} object. */
  @Test
  void usageInsideTheMessageObjectIsAUsageMemberToo() {
    String doc =
        "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"content\":[{\"message\":{\"usage\":{}}}],"
            + "\"model\":\"m\",\"usage\":{\"input_tokens\":1,\"output_tokens\":0}},"
            + "\"messages\":{\"usage\":{}},\"x\":{\"message\":{\"usage\":{}}}}";
    byte[] bytes = doc.getBytes(StandardCharsets.UTF_8);
    int start = doc.indexOf("{\"input_tokens\"");
    assertEveryChunkSize(bytes, List.of("USAGE_OBJECT_START@" + start, "USAGE_OBJECT_END@" + doc.indexOf("}},"), "WELL-FORMED"));
    JsonUsageScanner s = new JsonUsageScanner(ApiShapes.usageContainers());
    for (int i = 0; i < bytes.length; ) {
      i = s.scan(bytes, i, bytes.length);
    }
    assertThat(new String(s.modelText(), StandardCharsets.UTF_8)).isEqualTo("m");
  }

  @Test
  void keepsTheRawTextOfTheLastStringModel() {
    String doc =
        "{\"model\":\"first\",\"x\":{\"model\":\"nested\"},\"response\":{\"model\":\"r\\u00e9\\\"s\"},\"model\":7,\"choices\":[]}";
    byte[] bytes = doc.getBytes(StandardCharsets.UTF_8);
    for (int chunk = 1; chunk <= bytes.length; chunk++) {
      JsonUsageScanner s = new JsonUsageScanner(ApiShapes.usageContainers());
      for (int off = 0; off < bytes.length; off += chunk) {
        s.scan(bytes, off, Math.min(bytes.length, off + chunk));
      }
      assertThat(s.complete()).isTrue();
      assertThat(new String(s.modelText(), StandardCharsets.UTF_8)).isEqualTo("r\\u00e9\\\"s");
    }
    JsonUsageScanner s = new JsonUsageScanner(ApiShapes.usageContainers());
    byte[] long1 = ("{\"model\":\"" + "m".repeat(JsonUsageScanner.MAX_MODEL_BYTES + 1) + "\"}").getBytes(StandardCharsets.UTF_8);
    s.scan(long1, 0, long1.length);
    assertThat(s.complete()).isTrue();
    assertThat(s.modelText()).isNull();
  }

  @Test
  void randomMutationsOfRealisticDocumentsGetJacksonsVerdict() {
    byte[] alphabet = b("{}[]\":,\\ 0-1.eE+tfnu\n<00><1F><7F><80><BF><C3><E2><ED><F0><F8><FF>a\t");
    String[] seeds = {
      "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"model\":\"m\",\"choices\":[{\"index\":0,\"message\":"
          + "{\"role\":\"assistant\",\"content\":\"Paris \\\"is\\\" é 😀\\u00e9\"},\"logprobs\":{\"content\":[{\"token\":\"P\","
          + "\"logprob\":-0.0012,\"bytes\":[80],\"top_logprobs\":[]}]},\"finish_reason\":\"stop\"}],"
          + "\"usage\":{\"prompt_tokens\":101,\"completion_tokens\":13,\"total_tokens\":114,\"prompt_tokens_details\":{\"cached_tokens\":101}},"
          + "\"x\":[true,false,null,1.5E3,-0,0.25e-2]}",
      "{ \"usage\" : { \"prompt_tokens\" : 1 , \"completion_tokens\" : 2 } ,\r\n\t\"response\":{\"usage\":null,\"model\":\"a\\\\b\"}}",
    };
    Random random = new Random(7);
    int wellFormed = 0;
    int malformed = 0;
    for (String seed : seeds) {
      byte[] base = seed.getBytes(StandardCharsets.UTF_8);
      for (int n = 0; n < 4000; n++) {
        byte[] doc = base.clone();
        int edits = 1 + random.nextInt(3);
        for (int e = 0; e < edits; e++) {
          doc[random.nextInt(doc.length)] = alphabet[random.nextInt(alphabet.length)];
        }
        boolean accepted = jacksonAccepts(doc);
        String expected = accepted ? "WELL-FORMED" : "MALFORMED";
        if (accepted) {
          wellFormed++;
        } else {
          malformed++;
        }
        List<String> events = scan(doc, 1 + random.nextInt(doc.length));
        assertThat(events.get(events.size() - 1))
            .as("%s", new String(doc, StandardCharsets.ISO_8859_1))
            .isEqualTo(expected);
      }
    }
    // Both verdicts are well represented, so the comparison means something either way.
    assertThat(wellFormed).isGreaterThan(1000);
    assertThat(malformed).isGreaterThan(1000);
  }

  @Test
  void tellsAStructureTheTopLevelsNamesDecodedAndPositionsInAnyChunking() {
    String doc = "{\"a\\u0062\":{\"c\":[true,{\"deep\":1}]},\"" + "n".repeat(40) + "\":null,\"é\":2}";
    byte[] bytes = doc.getBytes(StandardCharsets.UTF_8);
    List<String> expected =
        List.of(
            "name 1 ab",
            "start 1 { @11",
            "name 2 c",
            "start 2 [ @16",
            "close 1 @33",
            "name 1 null",
            "start 1 n @78",
            "literal 1 n end 82",
            "name 1 null",
            "start 1 2 @88",
            "close 0 @89");
    for (int step : new int[] {1, 3, bytes.length}) {
      List<String> events = new ArrayList<>();
      JsonUsageScanner s = new JsonUsageScanner(List.of("ab"), new Recorder(events));
      for (int from = 0; from < bytes.length; from += step) {
        int to = Math.min(bytes.length, from + step);
        for (int i = from; i < to; ) {
          i = s.scan(bytes, i, to);
        }
      }
      assertThat(s.complete()).isTrue();
      assertThat(events).as("step %d", step).isEqualTo(expected);
    }
  }

  /** Writes down every structure event. */
  private record Recorder(List<String> events) implements JsonUsageScanner.Structure {
    @Override
    public void memberName(int depth, String name) {
      events.add("name " + depth + " " + name);
    }

    @Override
    public void valueStart(int depth, int first, int index) {
      events.add("start " + depth + " " + (char) first + " @" + index);
    }

    @Override
    public void literalEnd(int depth, int first, int end) {
      events.add("literal " + depth + " " + (char) first + " end " + end);
    }

    @Override
    public void containerEnd(int depth, int index) {
      events.add("close " + depth + " @" + index);
    }
  }
}
