package io.disaggusage.extproc.usage;

import static io.disaggusage.extproc.usage.JsonUsageRewriterTest.contextOf;
import static io.disaggusage.extproc.usage.JsonUsageRewriterTest.ctx;
import static io.disaggusage.extproc.usage.JsonUsageRewriterTest.rejection;
import static io.disaggusage.extproc.usage.JsonUsageRewriterTest.rewrite;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.disaggusage.extproc.usage.JsonUsageRewriter.Reason;
import io.disaggusage.extproc.usage.JsonUsageRewriter.Rewritten;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The Anthropic Messages rule (behaviour.md, "Anthropic Messages"): prompt split from the context
 * worker in either shape, {@code output_tokens} from the generation worker, every combination of
 * present, absent and null members, and context usage read from either shape.
 */
class MessagesUsageRuleTest {
  private static final JsonUsageRewriter REWRITER =
      new JsonUsageRewriter(UsageDocument.newFactory(1 << 20), 64 * 1024);
  private static final ObjectMapper MAPPER = new ObjectMapper();

  /** What the context worker says, in the shape of each leg a proxy may have sent it on. */
  static final String CTX_CHAT =
      "{\"prompt_tokens\":186,\"completion_tokens\":1,\"total_tokens\":187,\"prompt_tokens_details\":{\"cached_tokens\":64}}";
  /** The same usage from a vLLM context leg on {@code /v1/messages} (cache counts reported). */
  static final String CTX_MESSAGES =
      "{\"input_tokens\":122,\"output_tokens\":1,\"cache_read_input_tokens\":64,\"cache_creation_input_tokens\":0}";
  /** A decode worker's usage: the transferred KV reported as a prefix-cache hit. */
  static final String GEN_INFLATED =
      "{\"input_tokens\":0,\"output_tokens\":8,\"cache_read_input_tokens\":186,\"cache_creation_input_tokens\":0}";
  static final String GEN_CORRECTED =
      "{\"input_tokens\":122,\"output_tokens\":8,\"cache_read_input_tokens\":64,\"cache_creation_input_tokens\":0}";

  static String message(String usage) {
    return "{\"id\":\"chatcmpl-9\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"text\","
        + "\"text\":\"Paris.\"}],\"model\":\"m\",\"stop_reason\":\"end_turn\",\"usage\":" + usage
        + ",\"kv_transfer_params\":null}";
  }

  static String messages(String ctxUsage, String genUsage) {
    return rewrite(ctxUsage, message(genUsage), ApiShapes.MESSAGES);
  }

  /**
   * One message rewritten against one context usage: the context leg in either shape, and generation
   * usage with members missing, null, stray, repeated or beyond 64 bits.
   */
  @ParameterizedTest(name = "{0}")
  @MethodSource("rewrittenMessages")
  void theGenerationUsageGetsTheContextSplit(
      String caseName, String contextUsage, String generationUsage, String expected) {
    assertThat(messages(contextUsage, generationUsage)).isEqualTo(message(expected));
  }

  static Stream<Arguments> rewrittenMessages() {
    return Stream.of(
        Arguments.of("context leg on chat/completions", CTX_CHAT, GEN_INFLATED, GEN_CORRECTED),
        Arguments.of("context leg on messages", CTX_MESSAGES, GEN_INFLATED, GEN_CORRECTED),
        Arguments.of(
            "cache counts are added when only the context worker states them",
            CTX_CHAT,
            "{\"input_tokens\":186,\"output_tokens\":8}",
            "{\"input_tokens\":122,\"output_tokens\":8,\"cache_read_input_tokens\":64,\"cache_creation_input_tokens\":0}"),
        Arguments.of(
            "null counts are replaced",
            CTX_CHAT,
            "{\"input_tokens\":null,\"output_tokens\":8,\"cache_read_input_tokens\":null,\"cache_creation_input_tokens\":null}",
            GEN_CORRECTED),
        Arguments.of(
            "no total is added and a stray one is left alone",
            CTX_CHAT,
            "{\"input_tokens\":0,\"output_tokens\":8,\"total_tokens\":3}",
            "{\"input_tokens\":122,\"output_tokens\":8,\"total_tokens\":3,\"cache_read_input_tokens\":64,\"cache_creation_input_tokens\":0}"),
        Arguments.of(
            "counts beyond 2^64 stay exact",
            "{\"prompt_tokens\":18446744073709551617,\"prompt_tokens_details\":{\"cached_tokens\":18446744073709551615}}",
            "{\"input_tokens\":1,\"output_tokens\":18446744073709551616}",
            "{\"input_tokens\":2,\"output_tokens\":18446744073709551616,"
                + "\"cache_read_input_tokens\":18446744073709551615,\"cache_creation_input_tokens\":0}"),
        Arguments.of(
            "duplicate keys: the last one wins",
            CTX_CHAT,
            "{\"input_tokens\":122,\"output_tokens\":8,\"input_tokens\":5,\"cache_read_input_tokens\":64,\"cache_creation_input_tokens\":0}",
            "{\"input_tokens\":122,\"output_tokens\":8,\"input_tokens\":122,\"cache_read_input_tokens\":64,\"cache_creation_input_tokens\":0}"));
  }

  /** vLLM before it reported cache counts: {@code input_tokens} is the whole prompt on both legs. */
  @Test
  void neitherLegStatesCacheCountsLeavesAnAlreadyRightUsageByteIdentical() {
    byte[] gen = message("{\"input_tokens\":186,\"output_tokens\":8}").getBytes(StandardCharsets.UTF_8);
    for (String c : List.of("{\"input_tokens\":186,\"output_tokens\":1}", "{\"prompt_tokens\":186,\"completion_tokens\":1}")) {
      var r = (Rewritten) REWRITER.rewrite(gen, ctx(c), ApiShapes.MESSAGES);
      assertThat(r.document()).isSameAs(gen);
      assertThat(r.corrected()).isFalse();
    }
  }

  /** No split from the context worker: the generation worker's cache counts must not survive it. */
  @ParameterizedTest
  @ValueSource(
      strings = {
        "{\"prompt_tokens\":186,\"completion_tokens\":1}",
        "{\"prompt_tokens\":186,\"prompt_tokens_details\":null}",
        "{\"prompt_tokens\":186,\"prompt_tokens_details\":{\"cached_tokens\":null}}",
        "{\"input_tokens\":186,\"output_tokens\":1}",
        "{\"input_tokens\":186,\"cache_read_input_tokens\":null,\"cache_creation_input_tokens\":null}"
      })
  void unknownContextSplitMeansNoCache(String c) {
    assertThat(messages(c, GEN_INFLATED))
        .isEqualTo(message("{\"input_tokens\":186,\"output_tokens\":8,\"cache_read_input_tokens\":0,\"cache_creation_input_tokens\":0}"));
  }

  @Test
  void cacheCreationFromAnAnthropicContextWorker() {
    String c = "{\"input_tokens\":10,\"cache_creation_input_tokens\":100,\"cache_read_input_tokens\":50,\"output_tokens\":1}";
    assertThat(messages(c, "{\"input_tokens\":0,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":160,\"output_tokens\":5}"))
        .isEqualTo(message("{\"input_tokens\":10,\"cache_creation_input_tokens\":100,\"cache_read_input_tokens\":50,\"output_tokens\":5}"));
    // Only a creation count stated: the read count is then 0.
    assertThat(messages("{\"input_tokens\":10,\"cache_creation_input_tokens\":100}", "{\"output_tokens\":5}"))
        .isEqualTo(message("{\"output_tokens\":5,\"input_tokens\":10,\"cache_read_input_tokens\":0,\"cache_creation_input_tokens\":100}"));
  }

  /** An Anthropic {@code message_delta} that states only the output count (the real API's older form). */
  @Test
  void outputOnlyUsageGetsThePromptSplit() {
    assertThat(rewrite(CTX_CHAT, "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":8}}", ApiShapes.MESSAGES))
        .isEqualTo("{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":8,"
            + "\"input_tokens\":122,\"cache_read_input_tokens\":64,\"cache_creation_input_tokens\":0}}");
    assertThat(rewrite("{\"prompt_tokens\":186}", "{\"usage\":{\"output_tokens\":8}}", ApiShapes.MESSAGES))
        .isEqualTo("{\"usage\":{\"output_tokens\":8,\"input_tokens\":186}}");
  }

  @Test
  void messageStartUsageInsideTheMessageObject() {
    String start =
        "{\"type\":\"message_start\",\"message\":{\"id\":\"chatcmpl-9\",\"type\":\"message\",\"role\":\"assistant\","
            + "\"content\":[],\"model\":\"m\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":186,\"output_tokens\":0}}}";
    var r = (Rewritten) REWRITER.rewrite(start.getBytes(StandardCharsets.UTF_8), ctx(CTX_CHAT), ApiShapes.MESSAGES);
    assertThat(new String(r.document(), StandardCharsets.UTF_8))
        .isEqualTo(start.replace("{\"input_tokens\":186,\"output_tokens\":0}",
            "{\"input_tokens\":122,\"output_tokens\":0,\"cache_read_input_tokens\":64,\"cache_creation_input_tokens\":0}"));
    assertThat(r.model()).isEqualTo("m");
  }

  @Test
  void cacheReadIsClampedToThePromptAndCreationToTheRest() {
    assertThat(messages("{\"prompt_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":99}}", GEN_INFLATED))
        .isEqualTo(message("{\"input_tokens\":0,\"output_tokens\":8,\"cache_read_input_tokens\":10,\"cache_creation_input_tokens\":0}"));
    // A stored entry can hold any split; the three counts still add up to the prompt.
    ContextUsage odd = new ContextUsage(BigInteger.TEN, Map.of("cached_tokens", "7"), BigInteger.valueOf(7), BigInteger.valueOf(9));
    var r = (Rewritten) REWRITER.rewrite(message(GEN_INFLATED).getBytes(StandardCharsets.UTF_8), odd, ApiShapes.MESSAGES);
    assertThat(new String(r.document(), StandardCharsets.UTF_8))
        .isEqualTo(message("{\"input_tokens\":0,\"output_tokens\":8,\"cache_read_input_tokens\":7,\"cache_creation_input_tokens\":3}"));
  }

  @Test
  void otherMembersAndBytesOutsideTheCountsAreUntouched() {
    String gen =
        "{ \"usage\" : { \"input_tokens\" : 0 ,\n \"cache_creation\": {\"ephemeral_5m_input_tokens\": 0},"
            + " \"cache_read_input_tokens\": 186, \"server_tool_use\": null, \"service_tier\": \"standard\","
            + " \"output_tokens\": 8 } , \"big\": 123456789012345678901234567890 }";
    assertThat(rewrite(CTX_CHAT, gen, ApiShapes.MESSAGES))
        .isEqualTo(gen.replace("\"input_tokens\" : 0", "\"input_tokens\" : 122")
            .replace("\"cache_read_input_tokens\": 186", "\"cache_read_input_tokens\": 64")
            .replace("\"output_tokens\": 8 }", "\"output_tokens\": 8 ,\"cache_creation_input_tokens\":0}"));
  }

  @Test
  void usageWithoutOutputTokensIsLeftAlone() {
    assertThat(rejection(CTX_CHAT, message("{\"input_tokens\":0}"), ApiShapes.MESSAGES)).isEqualTo(Reason.INVALID_USAGE);
  }

  /** Counts that cannot be true go out as the context's split, the output clamped. */
  @ParameterizedTest
  @CsvSource(
      delimiter = '|',
      value = {
        "{\"input_tokens\":0,\"output_tokens\":null} | 0",
        "{\"input_tokens\":0,\"output_tokens\":\"8\"} | 8",
        "{\"input_tokens\":0,\"output_tokens\":-8} | 0",
        "{\"input_tokens\":0,\"output_tokens\":8.0} | 8",
        "{\"input_tokens\":\"0\",\"output_tokens\":8} | 8",
        "{\"input_tokens\":-1,\"output_tokens\":8} | 8",
        "{\"input_tokens\":0,\"output_tokens\":8,\"cache_read_input_tokens\":1.5} | 8",
        "{\"input_tokens\":0,\"output_tokens\":8,\"cache_read_input_tokens\":{}} | 8",
        "{\"input_tokens\":0,\"output_tokens\":8,\"cache_creation_input_tokens\":-2} | 8",
        "{\"input_tokens\":0,\"output_tokens\":8,\"cache_creation_input_tokens\":\"x\"} | 8"
      })
  void impossibleGenerationCountsAreCorrected(String usage, long output) throws Exception {
    JsonUsageRewriter.Result r = REWRITER.rewrite(
        message(usage).getBytes(StandardCharsets.UTF_8), JsonUsageRewriterTest.ctx(CTX_CHAT), ApiShapes.MESSAGES);
    assertThat(r).isInstanceOfSatisfying(JsonUsageRewriter.Rewritten.class, w -> {
      assertThat(w.impossible()).isTrue();
      assertThat(w.figures().completion()).isEqualTo(BigInteger.valueOf(output));
    });
    JsonNode emitted = MAPPER.readTree(((JsonUsageRewriter.Rewritten) r).document()).get("usage");
    assertThat(emitted.get("input_tokens").asLong() + emitted.path("cache_read_input_tokens").asLong()
        + emitted.path("cache_creation_input_tokens").asLong()).isEqualTo(186);
    assertThat(emitted.get("cache_read_input_tokens").asLong()).isEqualTo(64);
    assertThat(emitted.get("output_tokens").isIntegralNumber()).isTrue();
  }

  @Test
  void withoutContextImpossibleCountsAreClamped() {
    byte[] doc = message("{\"input_tokens\":-3,\"output_tokens\":8.5,\"cache_read_input_tokens\":186}")
        .getBytes(StandardCharsets.UTF_8);
    JsonUsageRewriter.Rewritten r = (JsonUsageRewriter.Rewritten) REWRITER.rewrite(doc, null, ApiShapes.MESSAGES);
    assertThat(r.impossible()).isTrue();
    assertThat(new String(r.document(), StandardCharsets.UTF_8))
        .isEqualTo(message("{\"input_tokens\":0,\"output_tokens\":8,\"cache_read_input_tokens\":186}"));
    assertThat(r.figures().prompt()).isEqualTo(BigInteger.valueOf(186));
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "{\"input_tokens\":\"5\",\"cache_read_input_tokens\":1}",
        "{\"input_tokens\":null,\"cache_read_input_tokens\":1}",
        "{\"input_tokens\":5,\"cache_read_input_tokens\":-1}",
        "{\"input_tokens\":5,\"cache_read_input_tokens\":\"1\"}",
        "{\"input_tokens\":5,\"cache_creation_input_tokens\":1.5}",
        "{\"cache_read_input_tokens\":1,\"output_tokens\":1}"
      })
  void unusableAnthropicContextUsage(String usage) {
    assertThat(contextOf(usage)).isEmpty();
  }

  /** Context usage of every shape, as stored: whole prompt, cache read, cache creation. */
  @ParameterizedTest
  @CsvSource(
      delimiter = '|',
      nullValues = "-",
      value = {
        "{\"input_tokens\":122,\"cache_read_input_tokens\":64,\"cache_creation_input_tokens\":0} | 186 | 64 | 0  | true",
        "{\"input_tokens\":10,\"cache_read_input_tokens\":null,\"cache_creation_input_tokens\":5}  | 15  | 0  | 5  | true",
        "{\"input_tokens\":10,\"cache_read_input_tokens\":7}                                     | 17  | 7  | -  | true",
        "{\"input_tokens\":10,\"cache_read_input_tokens\":null}                                  | 10  | 0  | -  | false",
        "{\"input_tokens\":186,\"output_tokens\":1}                                              | 186 | 0  | -  | false",
        "{\"prompt_tokens\":186,\"prompt_tokens_details\":{\"cached_tokens\":64}}                | 186 | 64 | -  | true",
        "{\"prompt_tokens\":186,\"cache_read_input_tokens\":5}                                   | 186 | 0  | -  | false",
        "{\"prompt_tokens\":186}                                                                 | 186 | 0  | -  | false"
      })
  void contextUsageOfEveryShape(String usage, long prompt, long read, Long creation, boolean split) {
    ContextUsage c = ctx(usage);
    assertThat(c.promptTokens()).isEqualTo(BigInteger.valueOf(prompt));
    assertThat(c.cachedTokens()).isEqualTo(BigInteger.valueOf(read));
    assertThat(c.cacheCreationTokens()).isEqualTo(creation == null ? null : BigInteger.valueOf(creation));
    assertThat(c.statesCache()).isEqualTo(split);
  }

  /** An Anthropic context usage also corrects an OpenAI-shaped generation usage. */
  @Test
  void anthropicContextUsageForAChatGeneration() {
    String gen = "{\"usage\":{\"prompt_tokens\":160,\"completion_tokens\":5,\"total_tokens\":165,\"prompt_tokens_details\":{\"cached_tokens\":160}}}";
    assertThat(rewrite("{\"input_tokens\":10,\"cache_creation_input_tokens\":100,\"cache_read_input_tokens\":50}", gen, ApiShapes.CHAT))
        .isEqualTo(gen.replace("{\"cached_tokens\":160}", "{\"cached_tokens\":50}"));
    assertThat(rewrite("{\"input_tokens\":160,\"output_tokens\":1}", gen, ApiShapes.CHAT))
        .isEqualTo(gen.replace("{\"cached_tokens\":160}", "{\"cached_tokens\":0}"));
  }

  @Test
  void figuresAreTheWholePromptTheCacheReadAndTheOutput() {
    var r = (Rewritten) REWRITER.rewrite(message(GEN_INFLATED).getBytes(StandardCharsets.UTF_8), ctx(CTX_CHAT), ApiShapes.MESSAGES);
    assertThat(r.corrected()).isTrue();
    assertThat(r.figures()).isEqualTo(figures(186, 64L, 8, 194, 186L));
    assertThat(REWRITER.inspect(message(GEN_INFLATED).getBytes(StandardCharsets.UTF_8), ApiShapes.MESSAGES))
        .isEqualTo(figures(186, 186L, 8, 194, 186L));
    assertThat(REWRITER.inspect(message("{\"input_tokens\":186,\"output_tokens\":8}").getBytes(StandardCharsets.UTF_8), ApiShapes.MESSAGES))
        .isEqualTo(figures(186, null, 8, 194, null));
    var nulled = (Rewritten) REWRITER.rewrite(
        message("{\"input_tokens\":186,\"output_tokens\":8,\"cache_read_input_tokens\":null}").getBytes(StandardCharsets.UTF_8),
        ctx("{\"prompt_tokens\":186}"), ApiShapes.MESSAGES);
    assertThat(nulled.figures()).isEqualTo(figures(186, 0L, 8, 194, null));
  }

  private static UsageFigures figures(long prompt, Long cached, long completion, long total, Long reported) {
    return new UsageFigures(
        BigInteger.valueOf(prompt),
        cached == null ? null : BigInteger.valueOf(cached),
        BigInteger.valueOf(completion),
        BigInteger.valueOf(total),
        reported == null ? null : BigInteger.valueOf(reported));
  }

  /**
   * Every combination of the three prompt-side members absent, null or wrong, against context usage
   * with and without a split: the emitted prompt counts add up to the context worker's prompt, the
   * output count is the generation worker's, members appear exactly when the rule says, and applying
   * the rule again changes nothing.
   */
  @Test
  void everyCombinationOfPresentAbsentAndNullMembers() throws Exception {
    String[] names = {"input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"};
    String[] values = {null, "null", "999"};
    Map<String, Boolean> contexts =
        Map.of(CTX_CHAT, true, CTX_MESSAGES, true, "{\"prompt_tokens\":186}", false, "{\"input_tokens\":186}", false);
    int checked = 0;
    for (var context : contexts.entrySet()) {
      for (int combo = 0; combo < 27; combo++) {
        List<String> members = new ArrayList<>();
        int code = combo;
        boolean[] present = new boolean[3];
        for (int k = 0; k < 3; k++) {
          String v = values[code % 3];
          code /= 3;
          if (v != null) {
            members.add("\"" + names[k] + "\":" + v);
            present[k] = true;
          }
        }
        members.add(combo % 2 == 0 ? 0 : members.size(), "\"output_tokens\":8");
        String usage = "{" + String.join(",", members) + "}";
        String out = messages(context.getKey(), usage);
        JsonNode u = MAPPER.readTree(out).get("usage");
        boolean split = context.getValue();
        long sum = 0;
        for (int k = 0; k < 3; k++) {
          boolean expected = k == 0 || present[k] || split;
          assertThat(u.has(names[k])).as("%s in %s with %s", names[k], usage, context.getKey()).isEqualTo(expected);
          sum += u.path(names[k]).asLong(0);
        }
        assertThat(sum).as("prompt sum of %s", out).isEqualTo(186);
        assertThat(u.get("cache_read_input_tokens") == null ? 0 : u.get("cache_read_input_tokens").asLong())
            .isEqualTo(split ? 64 : 0);
        assertThat(u.get("output_tokens").asLong()).isEqualTo(8);
        byte[] once = out.getBytes(StandardCharsets.UTF_8);
        var again = (Rewritten) REWRITER.rewrite(once, ctx(context.getKey()), ApiShapes.MESSAGES);
        assertThat(again.corrected()).as("idempotent on %s", out).isFalse();
        assertThat(again.document()).isSameAs(once);
        checked++;
      }
    }
    assertThat(checked).isEqualTo(4 * 27);
  }
}
