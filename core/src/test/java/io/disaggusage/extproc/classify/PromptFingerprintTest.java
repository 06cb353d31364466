package io.disaggusage.extproc.classify;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.testkit.MsgpackBodies;
import io.disaggusage.extproc.testkit.MsgpackBodies.Style;
import io.disaggusage.extproc.usage.UsageDocument;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The prompt fingerprint: the same for every spelling of one value (member order, whitespace,
 * escapes, number forms, JSON or MessagePack, any chunking), different for a different prompt or
 * model, null for a body not read whole.
 */
class PromptFingerprintTest {
  static final String CHAT =
      "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
          + "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"h\\u00e9llo \\ud83d\\ude00\"}]}],"
          + "\"max_tokens\":32,\"temperature\":0.7,\"stream\":true}";
  static final String COMPLETIONS = "{\"model\":\"m\",\"prompt\":[[1,2,3],[9007199254740993]],\"max_tokens\":5}";
  static final String RESPONSES =
      "{\"model\":\"m\",\"instructions\":\"terse\",\"input\":[{\"role\":\"user\",\"content\":\"hi\"}],"
          + "\"max_output_tokens\":9,\"store\":true}";
  static final String ANTHROPIC =
      "{\"model\":\"claude\",\"system\":[{\"type\":\"text\",\"text\":\"s\"}],\"max_tokens\":64,"
          + "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}";
  static final String NUMBERS =
      "{\"model\":\"m\",\"prompt\":[1,-0,0.5,1e300,-2.5e-3,18446744073709551615,-9223372036854775808,"
          + "true,false,null,{},[],\"\"]}";

  static List<String> vectors() {
    return List.of(CHAT, COMPLETIONS, RESPONSES, ANTHROPIC, NUMBERS);
  }

  static PromptFingerprint json(String body, int... splits) {
    return json(body.getBytes(StandardCharsets.UTF_8), splits);
  }

  static PromptFingerprint json(byte[] b, int... splits) {
    return read(new RequestBodyScanner(UsageDocument.newFactory(1 << 20), 64 * 1024), b, splits);
  }

  static PromptFingerprint msgpack(byte[] b, int... splits) {
    return read(new MsgpackRequestScanner(UsageDocument.newFactory(1 << 20), 64 * 1024), b, splits);
  }

  private static PromptFingerprint read(RequestBodyReader reader, byte[] b, int... splits) {
    return ChunkedReads.read(reader, b, ChunkedReads.ARRAY_WINDOWS, splits).fingerprint();
  }

  @ParameterizedTest
  @MethodSource("vectors")
  void everySplitAndEveryEncodingGivesTheSameFingerprint(String body) {
    PromptFingerprint whole = json(body);
    assertThat(whole).isNotNull();
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    for (int i = 0; i <= b.length; i++) {
      assertThat(json(b, i)).as("json split at %d", i).isEqualTo(whole);
    }
    for (Style style : Style.values()) {
      byte[] packed = MsgpackBodies.fromJson(body, style);
      for (int i = 0; i <= packed.length; i++) {
        assertThat(msgpack(packed, i)).as("%s split at %d", style, i).isEqualTo(whole);
      }
      int[] bytewise = new int[packed.length];
      java.util.Arrays.setAll(bytewise, i -> i);
      assertThat(msgpack(packed, bytewise)).as("%s bytewise", style).isEqualTo(whole);
    }
  }

  @Test
  void memberOrderWhitespaceAndEscapesDoNotMatter() {
    assertSame(
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"A\"}]}",
        " {\n \"messages\" : [ { \"content\" : \"\\u0041\" , \"role\" : \"\\u0075ser\" } ] ,\t\"model\":\"m\" } ");
    // pd-sidecar's Go encoder escapes <, > and & as \u003c, \u003e, \u0026
    assertSame("{\"model\":\"m\",\"prompt\":\"<a&b>\"}", "{\"prompt\":\"\\u003ca\\u0026b\\u003e\",\"model\":\"m\"}");
    assertSame("{\"model\":\"m\",\"prompt\":\"/\"}", "{\"model\":\"m\",\"prompt\":\"\\/\"}");
  }

  @Test
  void numbersCompareByValue() {
    assertSame("{\"prompt\":[1]}", "{\"prompt\":[1.0]}");
    assertSame("{\"prompt\":[1]}", "{\"prompt\":[1e0]}");
    assertSame("{\"prompt\":[1]}", "{\"prompt\":[10E-1]}");
    assertSame("{\"prompt\":[0]}", "{\"prompt\":[-0.0]}");
    assertSame("{\"prompt\":[0.5]}", "{\"prompt\":[5e-1]}");
    assertSame("{\"prompt\":[4611686018427387904]}", "{\"prompt\":[4.611686018427387904e18]}");
    assertSame("{\"prompt\":[18446744073709551616]}", "{\"prompt\":[1.8446744073709551616e19]}");
    // Integers are exact beyond 2^53; fractions and exponents go through the nearest double.
    assertDifferent("{\"prompt\":[9007199254740993]}", "{\"prompt\":[9007199254740992]}");
    assertDifferent("{\"prompt\":[9223372036854775807]}", "{\"prompt\":[9223372036854775806]}");
    assertDifferent("{\"prompt\":[1]}", "{\"prompt\":[\"1\"]}");
    // beyond MessagePack's range, JSON only
    assertThat(json("{\"prompt\":[123456789012345678901234567890]}"))
        .isNotNull()
        .isNotEqualTo(json("{\"prompt\":[123456789012345678901234567891]}"));
    assertDifferent("{\"prompt\":[0.1]}", "{\"prompt\":[0.1000001]}");
  }

  @Test
  void structureMatters() {
    assertDifferent("{\"prompt\":[1,2]}", "{\"prompt\":[2,1]}"); // array order
    assertDifferent("{\"prompt\":[[1],2]}", "{\"prompt\":[1,[2]]}");
    assertDifferent("{\"prompt\":[\"ab\",\"c\"]}", "{\"prompt\":[\"a\",\"bc\"]}");
    assertDifferent("{\"prompt\":{\"a\":\"b\"}}", "{\"prompt\":{\"b\":\"a\"}}");
    assertDifferent("{\"prompt\":{\"a\":1,\"b\":1}}", "{\"prompt\":{\"a\":1}}");
    assertDifferent("{\"prompt\":{\"a\":1,\"a\":1}}", "{\"prompt\":{\"a\":1}}"); // duplicates count, as written
    assertDifferent("{\"prompt\":{}}", "{\"prompt\":[]}");
    assertDifferent("{\"prompt\":null}", "{\"prompt\":[null]}");
    assertDifferent("{\"prompt\":\"x\"}", "{\"input\":\"x\"}"); // the member's name counts
    assertDifferent("{\"model\":\"a\",\"prompt\":\"x\"}", "{\"model\":\"b\",\"prompt\":\"x\"}");
    assertDifferent("{\"prompt\":\"x\"}", "{\"model\":\"m\",\"prompt\":\"x\"}");
    assertDifferent("{\"messages\":[],\"system\":\"s\"}", "{\"messages\":[]}");
    assertDifferent("{\"input\":\"i\",\"instructions\":\"a\"}", "{\"input\":\"i\",\"instructions\":\"b\"}");
    assertDifferent("{\"prompt\":\"\\ud800\"}", "{\"prompt\":\"\\ufffd\"}"); // a lone surrogate is not replaced
  }

  @Test
  void onlyTheSharedMembersCount() {
    String client = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"max_tokens\":100,\"stream\":true}";
    assertSame(client,
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"max_tokens\":1,\"stream\":false,"
            + "\"kv_transfer_params\":{\"do_remote_decode\":true},\"min_tokens\":1,\"ignore_eos\":true,"
            + "\"bootstrap_room\":7,\"prompt_token_ids\":[1,2],\"temperature\":0,\"tools\":[{\"x\":{}}]}");
    // the last of two top-level members counts, as in a tree parse
    assertSame("{\"prompt\":\"a\",\"prompt\":\"b\"}", "{\"prompt\":\"b\"}");
  }

  @Test
  void tensorRtCompletionsLegsAreUnboundAndChatLegsKeepTheirMessages() {
    String ctx = "{\"model\":\"m\",\"prompt\":\"hello\",\"disaggregated_params\":{\"request_type\":\"context_only\"}}";
    String gen = "{\"model\":\"m\",\"prompt\":[15339],\"disaggregated_params\":{\"request_type\":\"generation_only\"}}";
    assertThat(json(ctx)).isNull();
    assertThat(json(gen)).isNull();
    String chatCtx = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
        + "\"disaggregated_params\":{\"request_type\":\"context_only\"}}";
    String chatGen = "{\"disaggregated_params\":{\"request_type\":\"generation_only\",\"ctx_request_id\":5},"
        + "\"prompt_token_ids\":[1,2,3],\"model\":\"m\",\"messages\":[{\"content\":\"q\",\"role\":\"user\"}]}";
    assertThat(json(chatCtx)).isNotNull().isEqualTo(json(chatGen));
    // A null disaggregated_params is no TensorRT-LLM body: the prompt counts.
    assertThat(json("{\"prompt\":\"p\",\"disaggregated_params\":null}")).isEqualTo(json("{\"prompt\":\"p\"}"));
  }

  @Test
  void noFingerprintWithoutAPromptOrAWholeBody() {
    assertThat(json("{\"model\":\"m\",\"max_tokens\":1}")).isNull();
    assertThat(json("{}")).isNull();
    assertThat(json("{\"extra\":{\"messages\":[]}}")).isNull(); // only top-level members count
    String body = CHAT;
    for (int cut = 0; cut < body.length(); cut++) {
      assertThat(json(body.substring(0, cut))).as("truncated at %d", cut).isNull();
    }
    assertThat(json(CHAT + "{}")).isNull();
    assertThat(json("{\"prompt\":\"x\",}")).isNull();
    assertThat(json("{\"prompt\":\"x\" \"y\"}")).isNull();
    assertThat(json("[{\"prompt\":\"x\"}]")).isNull();
    byte[] packed = MsgpackBodies.fromJson(CHAT, Style.COMPACT);
    for (int cut = 0; cut < packed.length; cut++) {
      assertThat(msgpack(java.util.Arrays.copyOf(packed, cut))).as("msgpack truncated at %d", cut).isNull();
    }
  }

  @Test
  void printsAs32HexDigits() {
    assertThat(json(CHAT).hex()).matches("[0-9a-f]{32}");
  }

  private static void assertSame(String a, String b) {
    assertThat(json(a)).as(a).isNotNull().isEqualTo(json(b));
    for (Style style : Style.values()) {
      assertThat(msgpack(MsgpackBodies.fromJson(b, style))).as("%s %s", style, b).isEqualTo(json(a));
    }
  }

  private static void assertDifferent(String a, String b) {
    assertThat(json(a)).as(a).isNotNull();
    assertThat(json(b)).as(b).isNotNull().isNotEqualTo(json(a));
  }
}
