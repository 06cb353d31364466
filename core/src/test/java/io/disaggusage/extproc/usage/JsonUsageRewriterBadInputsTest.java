package io.disaggusage.extproc.usage;

import static org.assertj.core.api.Assertions.assertThat;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The bad inputs the reliability work lists, each run through the fuzz property
 * ({@link JsonUsageRewriterFuzzTest#check}) and pinned to the result it must give.
 */
class JsonUsageRewriterBadInputsTest {
  static final ContextUsage C = new ContextUsage(BigInteger.valueOf(101), Map.of("cached_tokens", "7"), BigInteger.valueOf(7));
  static final String GOOD = "{\"prompt_tokens\":101,\"completion_tokens\":13,\"total_tokens\":114,\"prompt_tokens_details\":{\"cached_tokens\":101}}";

  static JsonUsageRewriter.Result rewrite(byte[] doc) throws Exception {
    JsonUsageRewriterFuzzTest.check(doc, C, ApiShapes.CHAT, 64 * 1024);
    return new JsonUsageRewriter(JsonUsageRewriterFuzzTest.FACTORY, 64 * 1024).rewrite(doc, C, ApiShapes.CHAT);
  }

  static JsonUsageRewriter.Result rewrite(String doc) throws Exception {
    return rewrite(doc.getBytes(StandardCharsets.UTF_8));
  }

  static String text(JsonUsageRewriter.Result r) {
    return new String(((JsonUsageRewriter.Rewritten) r).document(), StandardCharsets.UTF_8);
  }

  @Test
  void invalidUtf8OutsideUsageIsRejectedUntouched() throws Exception {
    byte[] doc = ("{\"model\":\"m\u00C3\u0028\",\"usage\":" + GOOD + "}").getBytes(StandardCharsets.ISO_8859_1);
    assertThat(rewrite(doc)).isInstanceOf(JsonUsageRewriter.Rejected.class);
    byte[] lone = ("{\"model\":\"\u00FF\",\"usage\":" + GOOD + "}").getBytes(StandardCharsets.ISO_8859_1);
    assertThat(rewrite(lone)).isInstanceOf(JsonUsageRewriter.Rejected.class);
  }

  @Test
  void deepNestingIsRejectedNotAStackOverflow() throws Exception {
    String deep = "[".repeat(100_000) + "]".repeat(100_000);
    assertThat(rewrite("{\"x\":" + deep + ",\"usage\":" + GOOD + "}")).isInstanceOf(JsonUsageRewriter.Rejected.class);
    String deepObjects = "{\"a\":".repeat(5000) + "1" + "}".repeat(5000);
    assertThat(rewrite(deepObjects)).isInstanceOf(JsonUsageRewriter.Rejected.class);
  }

  @Test
  void duplicateUsageKeysRewriteTheLastOccurrence() throws Exception {
    String first = "{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}";
    var r = rewrite("{\"usage\":" + first + ",\"usage\":" + GOOD + "}");
    assertThat(text(r)).isEqualTo("{\"usage\":" + first + ",\"usage\":" + GOOD.replace(":{\"cached_tokens\":101}", ":{\"cached_tokens\":7}") + "}");
    assertThat(rewrite("{\"usage\":" + GOOD + ",\"usage\":null}")).isInstanceOf(JsonUsageRewriter.NoUsage.class);
    var inner = rewrite("{\"usage\":{\"prompt_tokens\":5,\"prompt_tokens\":101,\"completion_tokens\":2}}");
    assertThat(((JsonUsageRewriter.Rewritten) inner).figures().prompt()).isEqualTo(BigInteger.valueOf(101));
  }

  @Test
  void countsThatCannotBeTrueAreCorrectedNeverPassed() throws Exception {
    String[][] cases = {{"\"13\"", "13"}, {"-1", "0"}, {"13.0", "13"}, {"1e3", "1000"}, {"true", "0"}, {"null", "0"},
        {"[13]", "0"}, {"{}", "0"}};
    for (String[] c : cases) {
      var r = rewrite("{\"usage\":{\"prompt_tokens\":101,\"completion_tokens\":" + c[0] + "}}");
      assertThat(text(r)).as(c[0]).startsWith("{\"usage\":{\"prompt_tokens\":101,\"completion_tokens\":" + c[1] + ",");
      assertThat(((JsonUsageRewriter.Rewritten) r).impossible()).isTrue();
    }
    assertThat(text(rewrite("{\"usage\":{\"prompt_tokens\":\"101\",\"completion_tokens\":1}}")))
        .startsWith("{\"usage\":{\"prompt_tokens\":101,");
    assertThat(text(rewrite("{\"usage\":{\"prompt_tokens\":101,\"completion_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":-5}}}")))
        .contains("{\"cached_tokens\":7}");
    assertThat(text(rewrite("{\"usage\":{\"prompt_tokens\":101,\"completion_tokens\":1,\"total_tokens\":1.5}}")))
        .contains("\"total_tokens\":102");
  }

  @Test
  void hugeCountsStayExact() throws Exception {
    String huge = "123456789012345678901234567890";
    var r = rewrite("{\"usage\":{\"prompt_tokens\":101,\"completion_tokens\":" + huge + "}}");
    assertThat(((JsonUsageRewriter.Rewritten) r).figures().total()).isEqualTo(new BigInteger(huge).add(BigInteger.valueOf(101)));
    // A number longer than the parser's number-length limit is malformed, not a crash.
    assertThat(rewrite("{\"usage\":{\"prompt_tokens\":101,\"completion_tokens\":" + "9".repeat(5000) + "}}"))
        .isInstanceOf(JsonUsageRewriter.Rejected.class);
  }

  @Test
  void usageNullAndTruncatedJson() throws Exception {
    assertThat(rewrite("{\"usage\":null}")).isInstanceOf(JsonUsageRewriter.NoUsage.class);
    String whole = "{\"model\":\"m\",\"usage\":" + GOOD + "}";
    for (int cut = 0; cut < whole.length(); cut++) {
      assertThat(rewrite(whole.substring(0, cut))).as("cut at %d", cut).isInstanceOf(JsonUsageRewriter.Rejected.class);
    }
  }

  @Test
  void nulBytesAndControlCharacters() throws Exception {
    assertThat(rewrite("{\"usage\":" + GOOD + "}\u0000")).isInstanceOf(JsonUsageRewriter.Rejected.class);
    assertThat(rewrite("{\"a\":\"x\u0000y\",\"usage\":" + GOOD + "}")).isInstanceOf(JsonUsageRewriter.Rejected.class);
    assertThat(rewrite("\u0000{\"usage\":" + GOOD + "}")).isInstanceOf(JsonUsageRewriter.Rejected.class);
  }

  @Test
  void byteOrderMarkKeepsEveryByteAndPatchesTheRightOffsets() throws Exception {
    byte[] bom = {(byte) 0xEF, (byte) 0xBB, (byte) 0xBF};
    byte[] body = ("{\"usage\":" + GOOD + "}").getBytes(StandardCharsets.UTF_8);
    byte[] doc = new byte[bom.length + body.length];
    System.arraycopy(bom, 0, doc, 0, 3);
    System.arraycopy(body, 0, doc, 3, body.length);
    var r = rewrite(doc);
    if (r instanceof JsonUsageRewriter.Rewritten rw) {
      byte[] expected = ("{\"usage\":" + GOOD.replace("{\"cached_tokens\":101}", "{\"cached_tokens\":7}") + "}").getBytes(StandardCharsets.UTF_8);
      byte[] withBom = new byte[3 + expected.length];
      System.arraycopy(bom, 0, withBom, 0, 3);
      System.arraycopy(expected, 0, withBom, 3, expected.length);
      assertThat(rw.document()).isEqualTo(withBom);
    } else {
      assertThat(r).isInstanceOf(JsonUsageRewriter.Rejected.class);
    }
  }

  @Test
  void multiMegabyteStringsAroundTheUsage() throws Exception {
    String big = "x".repeat(3 * 1024 * 1024);
    var r = rewrite("{\"content\":\"" + big + "\",\"usage\":" + GOOD + ",\"tail\":\"" + big + "\"}");
    assertThat(text(r)).contains("{\"cached_tokens\":7}");
  }

  @Test
  void usageAboveItsCapIsRejected() throws Exception {
    var r = new JsonUsageRewriter(JsonUsageRewriterFuzzTest.FACTORY, 16).rewrite(("{\"usage\":" + GOOD + "}").getBytes(StandardCharsets.UTF_8), C, ApiShapes.CHAT);
    assertThat(r).isInstanceOfSatisfying(JsonUsageRewriter.Rejected.class, j -> assertThat(j.reason()).isEqualTo(JsonUsageRewriter.Reason.OVERSIZE_USAGE));
  }
}
