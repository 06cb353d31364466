package io.disaggusage.extproc.usage;

import static org.assertj.core.api.Assertions.assertThat;

import com.code_intelligence.jazzer.junit.FuzzTest;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.disaggusage.extproc.json.JsonObjectView;
import io.disaggusage.extproc.testkit.FuzzInput;
import java.math.BigInteger;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Fuzzes {@link JsonUsageRewriter}: no exception escapes, and the result is either the §2 rewrite or
 * the input untouched. For {@code Rewritten}, every byte outside the usage object is identical and the
 * usage object, parsed on its own by an independent parser, states the context's prompt and cached
 * counts, the generation's completion count and their sum; with nothing to correct the very input
 * array comes back. For every other result the input is not modified. Corpus:
 * {@code JsonUsageRewriterFuzzTestInputs/} (scenario bodies and the bad inputs).
 */
public class JsonUsageRewriterFuzzTest {
  static final JsonFactory FACTORY = UsageDocument.newFactory(1 << 24);
  static final ObjectMapper ORACLE = new ObjectMapper();
  static final BigInteger[] COUNTS = {
    BigInteger.ZERO, BigInteger.ONE, BigInteger.valueOf(7), BigInteger.valueOf(101), BigInteger.valueOf(4096),
    BigInteger.TWO.pow(53).add(BigInteger.ONE), BigInteger.valueOf(Long.MAX_VALUE), BigInteger.TEN.pow(30)
  };
  static final int[] MAX_USAGE = {64 * 1024, 16, 100, 1 << 20};

  @FuzzTest(maxDuration = "30s")
  void rewriteIsTheRuleOrNothing(byte[] input) throws Exception {
    FuzzInput in = new FuzzInput(input);
    BigInteger prompt = COUNTS[in.choose(COUNTS.length)];
    BigInteger cached = COUNTS[in.choose(COUNTS.length)];
    int shape = in.nextByte();
    OpenAiShape names = (OpenAiShape) ((shape & 1) == 0 ? ApiShapes.CHAT : ApiShapes.RESPONSES);
    Map<String, String> details = new LinkedHashMap<>();
    if ((shape & 2) == 0) {
      details.put(OpenAiShape.CACHED, cached.toString());
    }
    if ((shape & 4) != 0) {
      details.put("audio_tokens", "3");
    }
    ContextUsage c = new ContextUsage(prompt, details, details.containsKey(OpenAiShape.CACHED) ? cached : BigInteger.ZERO);
    check(in.document(), c, names, MAX_USAGE[in.choose(MAX_USAGE.length)]);
  }

  /** The property, for one document. */
  public static void check(byte[] doc, ContextUsage c, ApiShape shape, int maxUsage) throws Exception {
    OpenAiShape names = (OpenAiShape) shape;
    byte[] before = doc.clone();
    JsonUsageRewriter.Result result = new JsonUsageRewriter(FACTORY, maxUsage).rewrite(doc, c, names);
    assertThat(doc).as("input never modified").isEqualTo(before);
    if (!(result instanceof JsonUsageRewriter.Rewritten r)) {
      return;
    }
    JsonObjectView usage = UsageDocument.parse(FACTORY, before).usage();
    assertThat(usage).isNotNull();
    byte[] out = r.document();
    if (!r.corrected()) {
      assertThat(out).isSameAs(doc);
    }
    int tail = before.length - usage.end();
    assertThat(Arrays.copyOfRange(out, 0, usage.start()))
        .as("bytes before usage")
        .isEqualTo(Arrays.copyOfRange(before, 0, usage.start()));
    assertThat(Arrays.copyOfRange(out, out.length - tail, out.length))
        .as("bytes after usage")
        .isEqualTo(Arrays.copyOfRange(before, usage.end(), before.length));
    JsonNode emitted = ORACLE.readTree(Arrays.copyOfRange(out, usage.start(), out.length - tail));
    JsonNode original = ORACLE.readTree(Arrays.copyOfRange(before, usage.start(), usage.end()));
    assertThat(emitted.isObject()).isTrue();
    BigInteger prompt = c.promptTokens();
    BigInteger completion = clamped(original.get(names.completionMember()));
    BigInteger cached = c.cachedTokens().min(prompt);
    assertThat(emitted.get(names.completionMember()).bigIntegerValue()).isEqualTo(completion);
    // A content event's usage keeps its shape: members it lacks are not added.
    for (Map.Entry<String, BigInteger> e : Map.of(names.promptMember(), prompt, OpenAiShape.TOTAL, prompt.add(completion)).entrySet()) {
      if (emitted.has(e.getKey()) || !UsageDocument.parse(FACTORY, before).carriesContent()) {
        assertThat(emitted.get(e.getKey()).bigIntegerValue()).as(e.getKey()).isEqualTo(e.getValue());
      }
    }
    JsonNode details = emitted.get(names.promptDetailsMember());
    if (details != null && details.has(OpenAiShape.CACHED)) {
      assertThat(details.get(OpenAiShape.CACHED).bigIntegerValue()).isEqualTo(cached);
    }
    assertThat(r.figures().prompt()).isEqualTo(prompt);
    assertThat(r.figures().completion()).isEqualTo(completion);
    assertThat(r.figures().total()).isEqualTo(prompt.add(completion));
    assertThat(r.figures().cached()).isEqualTo(cached);
  }

  /**
   * The clamp of behaviour.md, computed independently: an integer ≥ 0 as it is, a negative one 0, a
   * number with a fraction its integer part (0 when negative), a string holding a JSON number that
   * number clamped, anything else 0.
   */
  static BigInteger clamped(JsonNode n) {
    if (n.isTextual()) {
      try {
        return n.textValue().matches("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?") && n.textValue().length() < 30
            ? clamped(ORACLE.readTree(n.textValue()))
            : BigInteger.ZERO;
      } catch (java.io.IOException e) {
        throw new AssertionError(e);
      }
    }
    if (!n.isNumber() || n.decimalValue().signum() <= 0) {
      return BigInteger.ZERO;
    }
    return n.isIntegralNumber() ? n.bigIntegerValue() : n.decimalValue().toBigInteger();
  }
}
