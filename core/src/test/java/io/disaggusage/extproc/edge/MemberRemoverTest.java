package io.disaggusage.extproc.edge;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.disaggusage.extproc.edge.MemberRemoverSpecificationTest.Run;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/** The remover's single cases: outputs spelled out, what it reads that Jackson does not, and rejections. */
class MemberRemoverTest {

  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  /** Output for {@code body}, the same for every two-chunk split and a byte at a time. */
  private static String removeEverySplit(String text) {
    byte[] body = utf8(text);
    Run whole = Run.of(body, Math.max(1, body.length));
    assertThat(whole.rejection()).as("rejection of %s", text).isNull();
    assertThat(whole.complete()).isTrue();
    for (int at = 0; at <= body.length; at++) {
      assertThat(Run.split(body, at).text()).as("cut at %d", at).isEqualTo(whole.text());
    }
    assertThat(Run.of(body, 1).text()).isEqualTo(whole.text());
    return whole.text();
  }

  private static Rejection rejectionEverySplit(String text) {
    return rejectionEverySplit(utf8(text));
  }

  private static Rejection rejectionEverySplit(byte[] body) {
    Run whole = Run.of(body, Math.max(1, body.length));
    for (int at = 0; at <= body.length; at++) {
      assertThat(Run.split(body, at).rejection()).as("cut at %d", at).isEqualTo(whole.rejection());
    }
    assertThat(Run.of(body, 1).rejection()).isEqualTo(whole.rejection());
    assertThat(whole.output()).isEmpty();
    return whole.rejection();
  }

  @ParameterizedTest
  @CsvSource(
      delimiter = '|',
      value = {
        "{\"kv_transfer_params\":{\"a\":1},\"model\":\"m\"}|{\"model\":\"m\"}",
        "{\"model\":\"m\",\"kv_transfer_params\":{\"a\":1}}|{\"model\":\"m\"}",
        "{\"a\":1, \"kv_transfer_params\":2, \"b\":3}|{\"a\":1, \"b\":3}",
        "{\"kv_transfer_params\":2}|{}",
        "{ \"kv_transfer_params\" : 2 }|{  }",
        "{\"kv_transfer_params\":1,\"bootstrap_room\":2,\"b\":3}|{\"b\":3}",
        "{\"kv_transfer_params\":1,\"a\":2,\"kv_transfer_params\":3}|{\"a\":2}",
        "{\"kv\\u005ftransfer_params\":1,\"a\":2}|{\"a\":2}",
        "{\"a\":NaN,\"b\":-Infinity,\"c\":Infinity,\"bootstrap_port\":1}|{\"a\":NaN,\"b\":-Infinity,\"c\":Infinity}",
        "{\"messages\":[{\"kv_transfer_params\":1}]}|{\"messages\":[{\"kv_transfer_params\":1}]}",
        "{\"vllm_xargs\":[{\"kv_transfer_params\":1}]}|{\"vllm_xargs\":[{\"kv_transfer_params\":1}]}",
        "{\"vllm_xargs\":{\"kv_transfer_params\":1,\"x\":2}}|{\"vllm_xargs\":{\"x\":2}}",
        "{\"vllm_xargs\":{\"kv_transfer_params\":1},\"vllm_xargs\":{\"kv_transfer_params\":2}}|{\"vllm_xargs\":{},\"vllm_xargs\":{}}",
        "{\"sampling_params\":{\"extra_args\":{\"kv_transfer_params\":{}}},\"extra_args\":{\"kv_transfer_params\":1}}|{\"sampling_params\":{\"extra_args\":{}},\"extra_args\":{\"kv_transfer_params\":1}}",
        "{\"a\":1.0E+2,\"b\":\"\\u00e9\\/\",\"disaggregated_params\":{\"request_type\":\"context_only\"}}|{\"a\":1.0E+2,\"b\":\"\\u00e9\\/\"}",
        "  {\"a\":1}  |  {\"a\":1}  ",
        "{}|{}",
      })
  void removesExactlyTheMembersAndOneComma(String body, String expected) {
    assertThat(removeEverySplit(body)).isEqualTo(expected);
  }

  @Test
  void prettyPrintedBodiesKeepTheirLayout() {
    String body = "{\n  \"model\": \"m\",\n  \"kv_transfer_params\": {\n    \"x\": 1\n  },\n  \"stream\": true\n}";
    assertThat(removeEverySplit(body)).isEqualTo("{\n  \"model\": \"m\",\n  \"stream\": true\n}");
    String first = "{\n  \"bootstrap_room\": 7,\n  \"stream\": true\n}";
    assertThat(removeEverySplit(first)).isEqualTo("{\n  \"stream\": true\n}");
  }

  @Test
  void countsWhatItRemovedByPath() {
    MemberRemover remover = MemberRemoval.defaults().start();
    remover.accept(
        utf8("{\"kv_transfer_params\":1,\"vllm_xargs\":{\"kv_transfer_params\":2},\"kv_transfer_params\":3,"
            + "\"bootstrap_host\":\"h\"}"),
        true);
    assertThat(remover.removed())
        .containsExactly(
            Map.entry("kv_transfer_params", 2),
            Map.entry("vllm_xargs.kv_transfer_params", 1),
            Map.entry("bootstrap_host", 1));
  }

  @Test
  void aChunkWithNothingRemovedIsForwardedAsItCame() {
    MemberRemover remover = MemberRemoval.defaults().start();
    byte[] first = utf8("{\"messages\":[{\"role\":\"user\",\"content\":\"");
    byte[] second = utf8("hello\"}]");
    assertThat(remover.accept(first, false)).isSameAs(first);
    assertThat(remover.accept(second, false)).isSameAs(second);
    assertThat(new String(remover.accept(utf8(",\"a\":1}"), true), StandardCharsets.UTF_8)).isEqualTo(",\"a\":1}");
  }

  @Test
  void holdsOnlyTheSeparatorAndTheNextName() {
    MemberRemover remover = MemberRemoval.defaults().start();
    assertThat(new String(remover.accept(utf8("{\"a\":1 , \"kv_tr"), false), StandardCharsets.UTF_8))
        .isEqualTo("{\"a\":1");
    // The name decides: the blank before the comma goes out, the comma goes with the member.
    assertThat(new String(remover.accept(utf8("ansfer_params\": [1, 2"), false), StandardCharsets.UTF_8)).isEqualTo(" ");
    assertThat(new String(remover.accept(utf8("] , \"b\":2}"), true), StandardCharsets.UTF_8))
        .isEqualTo(" , \"b\":2}");
  }

  @Test
  void aLeadingByteOrderMarkIsReadAndKept() {
    byte[] body = utf8("\uFEFF{\"bootstrap_room\":1,\"a\":2}");
    Run run = Run.of(body, body.length);
    assertThat(run.rejection()).isNull();
    assertThat(run.text()).isEqualTo("\uFEFF{\"a\":2}");
    for (int at = 0; at <= body.length; at++) {
      assertThat(Run.split(body, at).text()).isEqualTo("\uFEFF{\"a\":2}");
    }
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "{\"a\":1,}",
        "{\"a\":{\"b\":1,}}",
        "{\"a\":1, }",
        "{\"a\" 1}",
        "{\"a\":1 \"kv_transfer_params\":2}",
        "{\"a\":1} {\"kv_transfer_params\":2}",
        "{\"a\":1}x",
        "{\"a\":1}}",
        "{'a':1}",
        "{\"a\":01}",
        "{\"a\":INF}",
        "{\"a\":\"\u0001\"}",
        "{\"a\":tru}",
        "\uFEFF\uFEFF{}",
      })
  void malformedBodiesAreRejected(String body) {
    assertThat(rejectionEverySplit(body)).isEqualTo(Rejection.MALFORMED);
  }

  @ParameterizedTest
  @ValueSource(strings = {"", "   ", "{", "{\"a\":", "{\"kv_transfer_params\":{\"x\":1}", "{\"a\":\"abc", "\uFEFF"})
  void truncatedBodiesAreRejected(String body) {
    assertThat(rejectionEverySplit(body)).isEqualTo(Rejection.TRUNCATED);
  }

  @ParameterizedTest
  @ValueSource(strings = {"[]", "[{\"kv_transfer_params\":1}]", "\"text\"", "1", "null", "true"})
  void aRootThatIsNotAnObjectIsRejected(String body) {
    assertThat(rejectionEverySplit(body)).isEqualTo(Rejection.NOT_AN_OBJECT);
  }

  @Test
  void aPartialByteOrderMarkIsRejected() {
    assertThat(rejectionEverySplit(new byte[] {(byte) 0xEF, (byte) 0xBB, '{', '}'})).isEqualTo(Rejection.MALFORMED);
    assertThat(rejectionEverySplit(new byte[] {(byte) 0xEF, (byte) 0xBB})).isEqualTo(Rejection.TRUNCATED);
  }

  @Test
  void nestingBeyondTheLimitIsRejected() {
    MemberRemoval shallow = new MemberRemoval(MemberPaths.defaults(), new MemberRemoval.Limits(8, 1 << 20, 1 << 10));
    String ok = "{\"a\":" + "[".repeat(7) + "]".repeat(7) + "}";
    String deep = "{\"a\":" + "[".repeat(8) + "]".repeat(8) + "}";
    assertThat(Run.cut(shallow, utf8(ok), List.of()).rejection()).isNull();
    assertThat(Run.cut(shallow, utf8(deep), List.of()).rejection()).isEqualTo(Rejection.TOO_DEEP);
    assertThat(Run.cut(shallow, utf8(deep), List.of(9)).rejection()).isEqualTo(Rejection.TOO_DEEP);
  }

  @Test
  void theDefaultDepthIsPythons() {
    String deep = "{\"a\":" + "[".repeat(998) + "]".repeat(998) + "}";
    assertThat(Run.of(utf8(deep), 4096).rejection()).isNull();
    String deeper = "{\"a\":" + "[".repeat(1000) + "]".repeat(1000) + "}";
    assertThat(Run.of(utf8(deeper), 4096).rejection()).isEqualTo(Rejection.TOO_DEEP);
  }

  @Test
  void aStringOverTheLimitIsRejectedAsTooLarge() {
    MemberRemoval small = new MemberRemoval(MemberPaths.defaults(), new MemberRemoval.Limits(100, 1000, 1 << 10));
    assertThat(Run.cut(small, utf8("{\"a\":\"" + "x".repeat(1000) + "\"}"), List.of(500)).rejection()).isNull();
    assertThat(Run.cut(small, utf8("{\"a\":\"" + "x".repeat(1001) + "\"}"), List.of(500)).rejection())
        .isEqualTo(Rejection.TOO_LARGE);
    // Jackson checks its limit only as its buffer grows, and buffers are recycled on the thread: after a
    // long string read with larger limits, one over this limit fits the recycled buffer and passes it.
    Run.cut(MemberRemoval.defaults(), utf8("{\"a\":\"" + "y".repeat(200_000) + "\"}"), List.of());
    assertThat(Run.cut(small, utf8("{\"a\":\"" + "x".repeat(20_000) + "\"}"), List.of()).rejection())
        .isEqualTo(Rejection.TOO_LARGE);
  }

  @Test
  void aHeldRunOverTheCapIsRejectedForEverySplit() {
    MemberRemoval capped = new MemberRemoval(MemberPaths.defaults(), new MemberRemoval.Limits(100, 1 << 20, 64));
    String within = "{\"a\":1," + " ".repeat(50) + "\"b\":2}";
    String over = "{\"a\":1," + " ".repeat(70) + "\"b\":2}";
    byte[] overBytes = utf8(over);
    assertThat(Run.cut(capped, utf8(within), List.of(10)).rejection()).isNull();
    for (int at = 0; at <= overBytes.length; at++) {
      assertThat(Run.cut(capped, overBytes, List.of(at)).rejection()).as("cut at %d", at).isEqualTo(Rejection.TOO_LARGE);
    }
    // Blanks inside ordinary values and objects the paths do not reach are never held.
    String inner = "{\"messages\":[" + " ".repeat(500) + "{\"a\":" + " ".repeat(500) + "1}]}";
    assertThat(Run.cut(capped, utf8(inner), List.of(300)).rejection()).isNull();
  }

  @Test
  void bodiesOfManyMegabytesStreamWithLittleHeld() {
    StringBuilder body = new StringBuilder("{\"model\":\"m\",\"messages\":[");
    for (int i = 0; i < 25_000; i++) {
      body.append(i == 0 ? "" : ",").append("{\"role\":\"user\",\"content\":\"line ").append(i).append(" \\n text\"}");
    }
    body.append("],\"kv_transfer_params\":{\"do_remote_prefill\":true}}");
    byte[] bytes = utf8(body.toString());
    MemberRemover remover = MemberRemoval.defaults().start();
    List<byte[]> outputs = new ArrayList<>();
    int largestMissing = 0;
    long in = 0;
    long out = 0;
    for (int from = 0; from < bytes.length; from += 16_384) {
      int to = Math.min(bytes.length, from + 16_384);
      byte[] o = remover.accept(java.util.Arrays.copyOfRange(bytes, from, to), to == bytes.length);
      outputs.add(o);
      in += to - from;
      out += o.length;
      largestMissing = (int) Math.max(largestMissing, in - out);
    }
    assertThat(bytes.length).isGreaterThan(1 << 20);
    assertThat(remover.complete()).isTrue();
    assertThat(largestMissing).isLessThan(64);
    assertThat(remover.removed()).containsExactly(Map.entry("kv_transfer_params", 1));
  }

  @Test
  void feedingAfterTheEndIsAMistake() {
    MemberRemover remover = MemberRemoval.defaults().start();
    remover.accept(utf8("{}"), true);
    assertThatThrownBy(() -> remover.accept(utf8(" "), true)).isInstanceOf(IllegalStateException.class);
  }

  @Test
  void pathsAreCheckedWhenMade() {
    assertThat(MemberPaths.problem("a..b")).contains("empty member name");
    assertThat(MemberPaths.problem("")).isEqualTo("an empty path");
    assertThatThrownBy(() -> MemberPaths.of(List.of("a", "a.b")))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("removed whole");
    assertThat(MemberPaths.of(List.of("x.y", "x.y")).paths()).containsExactly("x.y");
  }

  @Test
  void customPathsReachAnyDepth() {
    MemberRemoval custom = new MemberRemoval(MemberPaths.of(List.of("a.b.c.d")), MemberRemoval.Limits.DEFAULTS);
    String body = "{\"a\":{\"b\":{\"c\":{\"d\":1,\"e\":2},\"d\":3}},\"d\":4}";
    assertThat(Run.cut(custom, utf8(body), List.of(13)).text()).isEqualTo("{\"a\":{\"b\":{\"c\":{\"e\":2},\"d\":3}},\"d\":4}");
  }
}
