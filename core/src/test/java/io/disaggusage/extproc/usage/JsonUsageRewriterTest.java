package io.disaggusage.extproc.usage;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.usage.JsonUsageRewriter.Reason;
import io.disaggusage.extproc.usage.JsonUsageRewriter.Rejected;
import io.disaggusage.extproc.usage.JsonUsageRewriter.Rewritten;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

/** The §2 rule on whole documents, including the golden vectors of engines.md. */
class JsonUsageRewriterTest {
  private static final JsonFactory FACTORY = UsageDocument.newFactory(1 << 20);
  private static final JsonUsageRewriter REWRITER = new JsonUsageRewriter(FACTORY, 64 * 1024);

  /** The context usage a context response with {@code "usage": usageJson} yields, if it is usable. */
  static Optional<ContextUsage> contextOf(String usageJson) {
    byte[] doc = ("{\"usage\":" + usageJson + "}").getBytes(StandardCharsets.UTF_8);
    try {
      return ApiShapes.context(UsageDocument.parse(FACTORY, doc).usage(), doc);
    } catch (UsageDocument.MalformedException e) {
      throw new AssertionError(e);
    }
  }

  static ContextUsage ctx(String usageJson) {
    return contextOf(usageJson).orElseThrow(() -> new AssertionError("context usage unusable: " + usageJson));
  }

  static String rewrite(String ctxUsage, String genDoc, ApiShape names) {
    JsonUsageRewriter.Result r =
        REWRITER.rewrite(genDoc.getBytes(StandardCharsets.UTF_8), ctx(ctxUsage), names);
    assertThat(r).isInstanceOf(Rewritten.class);
    return new String(((Rewritten) r).document(), StandardCharsets.UTF_8);
  }

  /** Why {@code genDoc} is left alone; fails when it is rewritten. */
  static Reason rejection(String ctxUsage, String genDoc, ApiShape names) {
    JsonUsageRewriter.Result r =
        REWRITER.rewrite(genDoc.getBytes(StandardCharsets.UTF_8), ctx(ctxUsage), names);
    assertThat(r).isInstanceOf(Rejected.class);
    return ((Rejected) r).reason();
  }

  /**
   * One generation document rewritten against one context usage, and the document that goes out: the
   * golden vectors of engines.md (G6 to G11) and the rule's edge cases.
   */
  @ParameterizedTest(name = "{0}")
  @MethodSource("rewrittenDocuments")
  void theRuleRewritesTheGenerationDocument(
      String caseName, ApiShape shape, String contextUsage, String generation, String expected) {
    assertThat(rewrite(contextUsage, generation, shape)).isEqualTo(expected);
  }

  static Stream<Arguments> rewrittenDocuments() {
    return Stream.of(
        Arguments.of(
            "G6 TensorRT-LLM non-streaming",
            ApiShapes.CHAT,
            "{\"prompt_tokens\":101,\"completion_tokens\":0,\"total_tokens\":101,\"prompt_tokens_details\":{\"cached_tokens\":7}}",
            "{\"id\":\"x\",\"usage\":{\"prompt_tokens\":101,\"completion_tokens\":13,\"total_tokens\":114,\"prompt_tokens_details\":{\"cached_tokens\":101}}}",
            "{\"id\":\"x\",\"usage\":{\"prompt_tokens\":101,\"completion_tokens\":13,\"total_tokens\":114,\"prompt_tokens_details\":{\"cached_tokens\":7}}}"),
        Arguments.of(
            "G7 streaming usage chunk",
            ApiShapes.CHAT,
            "{\"prompt_tokens\":128,\"completion_tokens\":0,\"total_tokens\":128,\"prompt_tokens_details\":{\"cached_tokens\":9}}",
            "{\"choices\":[],\"model\":\"test-model\",\"usage\":{\"prompt_tokens\":128,\"completion_tokens\":5,\"total_tokens\":133,\"prompt_tokens_details\":{\"cached_tokens\":128}}}",
            "{\"choices\":[],\"model\":\"test-model\",\"usage\":{\"prompt_tokens\":128,\"completion_tokens\":5,\"total_tokens\":133,\"prompt_tokens_details\":{\"cached_tokens\":9}}}"),
        Arguments.of(
            "G9a prompt and details from the context",
            ApiShapes.CHAT,
            "{\"prompt_tokens\":186,\"completion_tokens\":1,\"total_tokens\":187,\"prompt_tokens_details\":{\"cached_tokens\":64}}",
            "{\"usage\":{\"prompt_tokens\":999,\"completion_tokens\":8,\"total_tokens\":1007,\"prompt_tokens_details\":{\"cached_tokens\":999}}}",
            "{\"usage\":{\"prompt_tokens\":186,\"completion_tokens\":8,\"total_tokens\":194,\"prompt_tokens_details\":{\"cached_tokens\":64}}}"),
        Arguments.of(
            "G9b Responses API",
            ApiShapes.RESPONSES,
            "{\"input_tokens\":98,\"output_tokens\":1,\"total_tokens\":99,\"input_tokens_details\":{\"cached_tokens\":32}}",
            "{\"usage\":{\"input_tokens\":98,\"output_tokens\":8,\"total_tokens\":106,\"input_tokens_details\":{\"cached_tokens\":98},\"output_tokens_details\":{\"reasoning_tokens\":3}}}",
            "{\"usage\":{\"input_tokens\":98,\"output_tokens\":8,\"total_tokens\":106,\"input_tokens_details\":{\"cached_tokens\":32},\"output_tokens_details\":{\"reasoning_tokens\":3}}}"),
        Arguments.of(
            "G9c context without details means zero cached",
            ApiShapes.CHAT,
            "{\"prompt_tokens\":10,\"completion_tokens\":1,\"total_tokens\":11}",
            "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":2,\"total_tokens\":12,\"prompt_tokens_details\":{\"cached_tokens\":10}}}",
            "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":2,\"total_tokens\":12,\"prompt_tokens_details\":{\"cached_tokens\":0}}}"),
        Arguments.of(
            "G10 siblings and unknown keys kept",
            ApiShapes.CHAT,
            "{\"prompt_tokens\":100,\"completion_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":64}}",
            "{\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":20,\"total_tokens\":120,\"prompt_tokens_details\":{\"cached_tokens\":100,\"audio_tokens\":2},\"future_field\":7}}",
            "{\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":20,\"total_tokens\":120,\"prompt_tokens_details\":{\"cached_tokens\":64,\"audio_tokens\":2},\"future_field\":7}}"),
        Arguments.of(
            "G10 null details become an object",
            ApiShapes.CHAT,
            "{\"prompt_tokens\":100,\"completion_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":0}}",
            "{\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":20,\"total_tokens\":120,\"prompt_tokens_details\":null}}",
            "{\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":20,\"total_tokens\":120,\"prompt_tokens_details\":{\"cached_tokens\":0}}}"),
        Arguments.of(
            "G11 details created when the generation has none",
            ApiShapes.CHAT,
            "{\"prompt_tokens\":64,\"completion_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":7}}",
            "{\"usage\":{\"prompt_tokens\":64,\"completion_tokens\":3}}",
            "{\"usage\":{\"prompt_tokens\":64,\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":7},\"total_tokens\":67}}"),
        Arguments.of(
            "context detail keys are copied, generation-only keys kept",
            ApiShapes.CHAT,
            "{\"prompt_tokens\":50,\"prompt_tokens_details\":{\"audio_tokens\":4,\"cached_tokens\":null}}",
            "{\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":2,\"total_tokens\":52,\"prompt_tokens_details\":{\"cached_tokens\":50,\"cached_rate\":1.0}}}",
            "{\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":2,\"total_tokens\":52,\"prompt_tokens_details\":{\"cached_tokens\":0,\"cached_rate\":1.0,\"audio_tokens\":4}}}"),
        Arguments.of(
            "cached is clamped to the prompt",
            ApiShapes.CHAT,
            "{\"prompt_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":20}}",
            "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":2,\"total_tokens\":12,\"prompt_tokens_details\":{\"cached_tokens\":10}}}",
            "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":2,\"total_tokens\":12,\"prompt_tokens_details\":{\"cached_tokens\":10}}}"),
        Arguments.of(
            "counts beyond 2^53 stay exact",
            ApiShapes.CHAT,
            "{\"prompt_tokens\":9007199254740993,\"prompt_tokens_details\":{\"cached_tokens\":9007199254740993}}",
            "{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":9007199254740993,\"total_tokens\":2}}",
            "{\"usage\":{\"prompt_tokens\":9007199254740993,\"completion_tokens\":9007199254740993,\"total_tokens\":18014398509481986,\"prompt_tokens_details\":{\"cached_tokens\":9007199254740993}}}"),
        Arguments.of(
            "duplicate keys: the last one wins",
            ApiShapes.CHAT,
            "{\"prompt_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":2}}",
            "{\"usage\":{\"completion_tokens\":1,\"completion_tokens\":4,\"prompt_tokens\":10,\"total_tokens\":14}}",
            "{\"usage\":{\"completion_tokens\":1,\"completion_tokens\":4,\"prompt_tokens\":10,\"total_tokens\":14,\"prompt_tokens_details\":{\"cached_tokens\":2}}}"),
        Arguments.of(
            "a missing total is added",
            ApiShapes.CHAT,
            "{\"prompt_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":2}}",
            "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4,\"prompt_tokens_details\":{}}}",
            "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4,\"prompt_tokens_details\":{\"cached_tokens\":2},\"total_tokens\":14}}"),
        Arguments.of(
            "Responses stream event: usage inside response",
            ApiShapes.RESPONSES,
            "{\"input_tokens\":98,\"input_tokens_details\":{\"cached_tokens\":32}}",
            "{\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"model\":\"m\",\"usage\":{\"input_tokens\":98,\"output_tokens\":8,\"total_tokens\":106,\"input_tokens_details\":{\"cached_tokens\":98}}}}",
            "{\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"model\":\"m\",\"usage\":{\"input_tokens\":98,\"output_tokens\":8,\"total_tokens\":106,\"input_tokens_details\":{\"cached_tokens\":32}}}}"));
  }

  @Test
  void bytesOutsideUsageAreUntouched() {
    String gen =
        "{ \"id\" : \"a\\u00e9\" ,\n  \"x\": 1.50e3, \"big\": 123456789012345678901234567890,\n"
            + "  \"usage\": { \"prompt_tokens\": 20 , \"completion_tokens\": 5, \"total_tokens\": 25,"
            + " \"prompt_tokens_details\": { \"cached_tokens\": 20 } } ,\"z\":[ ] }";
    String out = rewrite("{\"prompt_tokens\":20,\"prompt_tokens_details\":{\"cached_tokens\":3}}", gen, ApiShapes.CHAT);
    assertThat(out).isEqualTo(gen.replace("\"cached_tokens\": 20", "\"cached_tokens\": 3"));
  }

  @Test
  void idempotentOnAlreadyCorrectResponse() {
    byte[] gen =
        "{\"usage\":{\"prompt_tokens\":101,\"completion_tokens\":13,\"total_tokens\":114,\"prompt_tokens_details\":{\"cached_tokens\":7}}}"
            .getBytes(StandardCharsets.UTF_8);
    var r =
        (Rewritten)
            REWRITER.rewrite(
                gen,
                ctx("{\"prompt_tokens\":101,\"prompt_tokens_details\":{\"cached_tokens\":7}}"),
                ApiShapes.CHAT);
    assertThat(r.document()).isSameAs(gen);
    assertThat(r.corrected()).isFalse();
    var again =
        (Rewritten)
            REWRITER.rewrite(
                r.document(),
                ctx("{\"prompt_tokens\":101,\"prompt_tokens_details\":{\"cached_tokens\":7}}"),
                ApiShapes.CHAT);
    assertThat(again.document()).isEqualTo(gen);
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "{\"usage\":{\"prompt_tokens\":10}}",
        "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4,\"prompt_tokens_details\":7}}"
      })
  void usageTheRuleCannotReadIsLeftAlone(String gen) {
    assertThat(rejection("{\"prompt_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":2}}", gen,
            ApiShapes.CHAT))
        .isEqualTo(Reason.INVALID_USAGE);
  }

  /** Counts that cannot be true never go out as they came: the context's values, or the clamp. */
  @ParameterizedTest
  @CsvSource(
      delimiter = '|',
      value = {
        "\"prompt_tokens\":\"10\",\"completion_tokens\":4 | \"prompt_tokens\":10,\"completion_tokens\":4",
        "\"prompt_tokens\":10,\"completion_tokens\":4.9 | \"prompt_tokens\":10,\"completion_tokens\":4",
        "\"prompt_tokens\":10,\"completion_tokens\":-4 | \"prompt_tokens\":10,\"completion_tokens\":0",
        "\"prompt_tokens\":10,\"completion_tokens\":1e2 | \"prompt_tokens\":10,\"completion_tokens\":100",
        "\"prompt_tokens\":10,\"completion_tokens\":\"4\" | \"prompt_tokens\":10,\"completion_tokens\":4",
        "\"prompt_tokens\":10,\"completion_tokens\":\"four\" | \"prompt_tokens\":10,\"completion_tokens\":0",
        "\"prompt_tokens\":10,\"completion_tokens\":true | \"prompt_tokens\":10,\"completion_tokens\":0",
        "\"prompt_tokens\":10,\"completion_tokens\":null | \"prompt_tokens\":10,\"completion_tokens\":0",
        "\"prompt_tokens\":10,\"completion_tokens\":1e999999999 | \"prompt_tokens\":10,\"completion_tokens\":0",
        "\"prompt_tokens\":10,\"completion_tokens\":1e-999999999 | \"prompt_tokens\":10,\"completion_tokens\":0",
        "\"prompt_tokens\":-10,\"completion_tokens\":4 | \"prompt_tokens\":10,\"completion_tokens\":4",
        "\"prompt_tokens\":10,\"completion_tokens\":4,\"total_tokens\":\"x\" | \"prompt_tokens\":10,\"completion_tokens\":4,\"total_tokens\":14",
        "\"prompt_tokens\":10,\"completion_tokens\":4,\"total_tokens\":-1 | \"prompt_tokens\":10,\"completion_tokens\":4,\"total_tokens\":14",
        "\"prompt_tokens\":10,\"completion_tokens\":4,\"prompt_tokens_details\":{\"cached_tokens\":-5} | \"prompt_tokens\":10,\"completion_tokens\":4,\"prompt_tokens_details\":{\"cached_tokens\":2}",
        "\"prompt_tokens\":10,\"completion_tokens\":4,\"prompt_tokens_details\":{\"cached_tokens\":9999} | \"prompt_tokens\":10,\"completion_tokens\":4,\"prompt_tokens_details\":{\"cached_tokens\":2}",
        "\"prompt_tokens\":10,\"completion_tokens\":4,\"prompt_tokens_details\":{\"cached_tokens\":2,\"audio_tokens\":-1} | \"prompt_tokens\":10,\"completion_tokens\":4,\"prompt_tokens_details\":{\"cached_tokens\":2,\"audio_tokens\":0}",
        "\"prompt_tokens\":10,\"completion_tokens\":4,\"completion_tokens_details\":{\"reasoning_tokens\":2.5,\"x\":-1} | \"prompt_tokens\":10,\"completion_tokens\":4,\"completion_tokens_details\":{\"reasoning_tokens\":2,\"x\":-1}"
      })
  void impossibleGenerationCountsAreCorrected(String gen, String expected) {
    String ctx = "{\"prompt_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":2}}";
    JsonUsageRewriter.Result r =
        REWRITER.rewrite(("{\"usage\":{" + gen + "}}").getBytes(StandardCharsets.UTF_8), ctx(ctx), ApiShapes.CHAT);
    assertThat(r).isInstanceOfSatisfying(Rewritten.class, w -> assertThat(w.impossible()).isTrue());
    String out = new String(((Rewritten) r).document(), StandardCharsets.UTF_8);
    // Added members (total, details) come after the generation's own, in the rule's order.
    assertThat(out).startsWith("{\"usage\":{" + expected);
    assertThat(rewrite(ctx, out, ApiShapes.CHAT)).as("the result is possible: nothing more to do").isEqualTo(out);
  }

  /** Without context usage only impossible counts change; a possible usage comes back as it is. */
  @ParameterizedTest
  @CsvSource(
      delimiter = '|',
      value = {
        "\"prompt_tokens\":10,\"completion_tokens\":4,\"total_tokens\":14,\"prompt_tokens_details\":{\"cached_tokens\":-5} | \"prompt_tokens\":10,\"completion_tokens\":4,\"total_tokens\":14,\"prompt_tokens_details\":{\"cached_tokens\":0} | 0",
        "\"prompt_tokens\":10,\"completion_tokens\":4,\"total_tokens\":14,\"prompt_tokens_details\":{\"cached_tokens\":9999} | \"prompt_tokens\":10,\"completion_tokens\":4,\"total_tokens\":14,\"prompt_tokens_details\":{\"cached_tokens\":10} | 10",
        "\"prompt_tokens\":10,\"completion_tokens\":-4,\"total_tokens\":6 | \"prompt_tokens\":10,\"completion_tokens\":0,\"total_tokens\":10 | -",
        "\"prompt_tokens\":10.5,\"completion_tokens\":4 | \"prompt_tokens\":10,\"completion_tokens\":4 | -"
      },
      nullValues = "-")
  void withoutContextImpossibleCountsAreClamped(String gen, String expected, Long cached) {
    byte[] doc = ("{\"usage\":{" + gen + "}}").getBytes(StandardCharsets.UTF_8);
    Rewritten r = (Rewritten) REWRITER.rewrite(doc, null, ApiShapes.CHAT);
    assertThat(r.impossible()).isTrue();
    assertThat(new String(r.document(), StandardCharsets.UTF_8)).isEqualTo("{\"usage\":{" + expected + "}}");
    assertThat(r.figures().cached()).isEqualTo(cached == null ? null : BigInteger.valueOf(cached));
    byte[] possible = ("{\"usage\":{" + expected + ",\"x\":-1}}").getBytes(StandardCharsets.UTF_8);
    Rewritten again = (Rewritten) REWRITER.rewrite(possible, null, ApiShapes.CHAT);
    assertThat(again.document()).isSameAs(possible);
    assertThat(again.impossible()).isFalse();
  }

  @Test
  void theEnginesNegativeReportIsKeptForTheRecord() {
    Rewritten r = (Rewritten) REWRITER.rewrite(
        "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4,\"prompt_tokens_details\":{\"cached_tokens\":-5}}}"
            .getBytes(StandardCharsets.UTF_8),
        ctx("{\"prompt_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":2}}"), ApiShapes.CHAT);
    assertThat(r.figures()).isEqualTo(new UsageFigures(BigInteger.TEN, BigInteger.TWO, BigInteger.valueOf(4),
        BigInteger.valueOf(14), BigInteger.valueOf(-5)));
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4}",
        "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4}}}",
        "[1,2]",
        "",
        "{\"a\":1} {\"b\":2}",
        "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":04}}"
      })
  void malformedDocumentsPassThrough(String gen) {
    assertThat(rejection("{\"prompt_tokens\":10}", gen, ApiShapes.CHAT)).isEqualTo(Reason.MALFORMED);
  }

  @ParameterizedTest
  @CsvSource(
      delimiter = '|',
      value = {
        "{\"completion_tokens\":1}",
        "{\"prompt_tokens\":-1}",
        "{\"prompt_tokens\":1.5}",
        "{\"prompt_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":\"3\"}}",
        "{\"prompt_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":-3}}",
        "{\"prompt_tokens\":10,\"prompt_tokens_details\":[1]}",
        "{\"prompt_tokens\":10,\"prompt_tokens_details\":{\"created_cache_tokens\":-1}}",
        "{\"prompt_tokens\":10,\"prompt_tokens_details\":{\"audio_tokens\":0.5}}"
      })
  void unusableContextUsage(String usage) {
    assertThat(contextOf(usage)).isEmpty();
  }

  @Test
  void noUsageAndNullUsage() {
    assertThat(REWRITER.rewrite("{\"choices\":[]}".getBytes(), ctx("{\"prompt_tokens\":1}"), ApiShapes.CHAT))
        .isInstanceOf(JsonUsageRewriter.NoUsage.class);
    assertThat(
            REWRITER.rewrite(
                "{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1},\"usage\":null}".getBytes(),
                ctx("{\"prompt_tokens\":1}"),
                ApiShapes.CHAT))
        .isInstanceOf(JsonUsageRewriter.NoUsage.class);
  }

  @Test
  void figuresReportWhatWasEmittedAndWhatWasReported() {
    var r =
        (Rewritten)
            REWRITER.rewrite(
                "{\"model\":\"m1\",\"usage\":{\"prompt_tokens\":101,\"completion_tokens\":13,\"total_tokens\":114,\"prompt_tokens_details\":{\"cached_tokens\":101}}}"
                    .getBytes(),
                ctx("{\"prompt_tokens\":101,\"prompt_tokens_details\":{\"cached_tokens\":7}}"),
                ApiShapes.CHAT);
    assertThat(r.model()).isEqualTo("m1");
    assertThat(r.corrected()).isTrue();
    assertThat(r.figures())
        .isEqualTo(
            new UsageFigures(
                BigInteger.valueOf(101),
                BigInteger.valueOf(7),
                BigInteger.valueOf(13),
                BigInteger.valueOf(114),
                BigInteger.valueOf(101)));
  }
}
