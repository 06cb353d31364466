package io.disaggusage.extproc.edge;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.edge.JsonDoc.Member;
import io.disaggusage.extproc.edge.JsonDoc.Obj;
import io.disaggusage.extproc.edge.JsonDoc.Raw;
import io.disaggusage.extproc.edge.JsonDoc.Value;
import io.disaggusage.extproc.edge.JsonDoc.Ws;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The remover's specification over a generated matrix: where the removed members sit among kept ones
 * (first, middle, last, only, runs of them), four whitespace styles, escaped spellings of the names,
 * the three depths the default paths reach, and values of every kind — each body fed whole, a byte at
 * a time and cut in two at every offset, the output identical for every split and equal to what the
 * rules say ({@link JsonDoc#expected}).
 */
class MemberRemoverSpecificationTest {
  private static final MemberRemoval REMOVAL = MemberRemoval.defaults();
  private static final MemberPaths.Node ROOT = REMOVAL.paths().root();

  /** Spellings of kv_transfer_params: plain, one escape, several, upper-case hex. */
  private static final List<String> KV_SPELLINGS =
      List.of(
          "\"kv_transfer_params\"",
          "\"kv\\u005ftransfer_params\"",
          "\"\\u006b\\u0076_transfer_param\\u0073\"",
          "\"kv\\u005Ftransfer_params\"");

  /** Values a removed member may have; each ends where a naive scanner would stumble. */
  private static final List<String> REMOVED_VALUES =
      List.of(
          "{\"do_remote_decode\":true,\"x\":[1,{\"y\":\"},]\"}],\"remote_host\":\"10.0.0.1\"}",
          "\"a \\\" , } ] string\"",
          "12.5e3",
          "null",
          "NaN",
          "[1, [2, {\"kv_transfer_params\": 3}]]",
          "-Infinity",
          "{}");

  /** Kept members: names that look like the removed ones but are not, and ordinary ones. */
  private static final List<Member> KEPT =
      List.of(
          Member.plain("model", new Raw("\"m\u00e9\"")),
          new Member("\"kv_transfer_params \"", "kv_transfer_params ", new Raw("1")),
          Member.plain("KV_transfer_params", new Raw("[true, false]")),
          Member.plain("messages", new Raw("[{\"role\":\"user\",\"content\":\"hi \\u00e9 \\ud83d\\ude00\"}]")),
          Member.plain("extra_args", new Raw("{\"kv_transfer_params\":{\"keep\":1}}")),
          Member.plain("temperature", new Raw("0.70")));

  static Stream<Arguments> matrix() {
    List<Arguments> cases = new ArrayList<>();
    int variant = 0;
    for (int length = 1; length <= 4; length++) {
      for (int layout = 0; layout < (1 << length); layout++) {
        for (Ws ws : Ws.ALL) {
          for (Nesting nesting : Nesting.values()) {
            List<Member> members = new ArrayList<>();
            for (int i = 0; i < length; i++) {
              boolean remove = (layout & (1 << i)) != 0;
              int v = variant + i;
              members.add(remove ? removed(nesting, v) : KEPT.get(v % KEPT.size()));
            }
            Value doc = nesting.wrap(new Obj(members, ws), ws);
            String name = nesting + " " + layoutName(layout, length) + " " + wsName(ws);
            cases.add(Arguments.of(name, doc));
            variant++;
          }
        }
      }
    }
    return cases.stream();
  }

  private static Member removed(Nesting nesting, int v) {
    String value = REMOVED_VALUES.get(v % REMOVED_VALUES.size());
    if (nesting == Nesting.ROOT && v % 3 == 1) {
      List<String> others = List.of("disaggregated_params", "bootstrap_host", "bootstrap_port", "bootstrap_room");
      String name = others.get(v % others.size());
      return Member.plain(name, new Raw(value));
    }
    return new Member(KV_SPELLINGS.get(v % KV_SPELLINGS.size()), "kv_transfer_params", new Raw(value));
  }

  private static String layoutName(int layout, int length) {
    StringBuilder s = new StringBuilder();
    for (int i = 0; i < length; i++) {
      s.append((layout & (1 << i)) != 0 ? 'R' : 'K');
    }
    return s.toString();
  }

  private static String wsName(Ws ws) {
    return List.of("compact", "spaced", "pretty", "crlf-tabs").get(Ws.ALL.indexOf(ws));
  }

  /** Where the generated members sit: in the root, or in the objects the nested default paths name. */
  enum Nesting {
    ROOT,
    VLLM_XARGS,
    EXTRA_ARGS;

    Value wrap(Obj inner, Ws ws) {
      return switch (this) {
        case ROOT -> inner;
        case VLLM_XARGS ->
            new Obj(
                List.of(
                    Member.plain("model", new Raw("\"m\"")),
                    Member.plain("vllm_xargs", inner),
                    Member.plain("stream", new Raw("true"))),
                ws);
        case EXTRA_ARGS ->
            new Obj(
                List.of(
                    Member.plain(
                        "sampling_params",
                        new Obj(
                            List.of(Member.plain("temperature", new Raw("0.5")), Member.plain("extra_args", inner)),
                            ws)),
                    Member.plain("kv_transfer_params", new Raw("{\"forged\":true}"))),
                ws);
      };
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("matrix")
  void everySplitGivesTheSpecifiedOutput(String name, Value doc) {
    byte[] body = JsonDoc.render(doc, ROOT).toBytes();
    String expected = JsonDoc.expected(doc, ROOT);
    Map<String, Integer> counts = JsonDoc.removedCounts(doc, ROOT);

    Run whole = Run.of(body, body.length);
    assertThat(whole.text()).isEqualTo(expected);
    assertThat(whole.rejection).isNull();
    assertThat(new java.util.TreeMap<>(whole.removed)).isEqualTo(counts);

    assertThat(Run.of(body, 1).text()).as("a byte at a time").isEqualTo(expected);
    for (int split = 0; split <= body.length; split++) {
      Run run = Run.split(body, split);
      assertThat(run.text()).as("cut at %d", split).isEqualTo(expected);
      assertThat(run.removed).isEqualTo(whole.removed);
    }
  }

  /** What a remover made of a body fed in chunks. */
  record Run(byte[] output, Rejection rejection, Map<String, Integer> removed, boolean complete) {
    String text() {
      return new String(output, StandardCharsets.UTF_8);
    }

    /** Fed in chunks of {@code size} bytes. */
    static Run of(byte[] body, int size) {
      List<Integer> cuts = new ArrayList<>();
      for (int at = size; at < body.length; at += size) {
        cuts.add(at);
      }
      return cut(MemberRemoval.defaults(), body, cuts);
    }

    /** Fed as two chunks cut at {@code at}. */
    static Run split(byte[] body, int at) {
      return cut(MemberRemoval.defaults(), body, List.of(at));
    }

    /** Fed in chunks cut at {@code cuts} (ascending), the last chunk ending the body. */
    static Run cut(MemberRemoval removal, byte[] body, List<Integer> cuts) {
      MemberRemover remover = removal.start();
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      int from = 0;
      for (int cut : cuts) {
        out.writeBytes(remover.accept(java.util.Arrays.copyOfRange(body, from, cut), false));
        from = cut;
      }
      out.writeBytes(remover.accept(java.util.Arrays.copyOfRange(body, from, body.length), true));
      return new Run(out.toByteArray(), remover.rejection(), Map.copyOf(remover.removed()), remover.complete());
    }
  }
}
