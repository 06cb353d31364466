package io.disaggusage.extproc.sse;

import static io.disaggusage.extproc.sse.SseTestSupport.concat;
import static io.disaggusage.extproc.testing.Text.utf8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** Parsed views of {@link SseEvent}: payload, event type, offset mapping, patching, pre-checks. */
class SseEventTest {

  private static final byte[] BOM = {(byte) 0xEF, (byte) 0xBB, (byte) 0xBF};

  /** Frames a stream that holds exactly one event. */
  private static SseEvent event(byte[] stream) {
    List<SseItem> items = SseFramer.frameAll(stream, 1 << 16);
    assertThat(items).hasSize(1);
    assertThat(items.get(0)).isInstanceOf(SseEvent.class);
    return (SseEvent) items.get(0);
  }

  private static SseEvent event(String stream) {
    return event(utf8(stream));
  }

  @Test
  void singleDataLineIsAViewIntoTheRawBytes() {
    SseEvent e = event("data: {\"a\":1}\n\n");

    assertThat(e.payloadString()).isEqualTo("{\"a\":1}");
    assertThat(e.payloadArray()).isSameAs(e.rawArray());
    assertThat(e.payloadOffset()).isEqualTo(6);
    assertThat(e.payloadLength()).isEqualTo(7);
    assertThat(e.dataLineCount()).isEqualTo(1);
    assertThat(e.hasData()).isTrue();
    assertThat(e.eventType()).isNull();
    assertThat(e.terminated()).isTrue();
    assertThat(e.rawString()).isEqualTo("data: {\"a\":1}\n\n");
  }

  @ParameterizedTest(name = "{0}")
  @CsvSource(delimiter = '|', quoteCharacter = '\'', value = {
    "'data: x'     | x",
    "'data:x'      | x",
    "'data:  x'    | ' x'",
    "'data: x '    | 'x '",
    "'data:'       | ''",
    "'data'        | ''",
    "'data: a:b'   | a:b",
    "'data::'      | :",
  })
  void dataValueHasOneLeadingSpaceRemoved(String line, String payload) {
    SseEvent e = event(line + "\n\n");

    assertThat(e.payloadString()).isEqualTo(payload);
    assertThat(e.dataLineCount()).isEqualTo(1);
    assertThat(e.hasData()).isTrue();
  }

  @Test
  void multipleDataLinesAreJoinedWithNewlineWhateverTheLineEndings() {
    SseEvent e = event("data: a\ndata:b\r\ndata\rdata:  c\n\n");

    assertThat(e.payloadString()).isEqualTo("a\nb\n\n c");
    assertThat(e.dataLineCount()).isEqualTo(4);
  }

  @Test
  void otherFieldsAndCommentsAreNotPayloadButStayInRaw() {
    String raw = ": data: no\nid: 1\nretry: 5\nfoo: data\ndatax: 1\n data: 2\nData: 3\ndata: real\n\n";
    SseEvent e = event(raw);

    assertThat(e.payloadString()).isEqualTo("real");
    assertThat(e.dataLineCount()).isEqualTo(1);
    assertThat(e.rawString()).isEqualTo(raw);
  }

  @Test
  void eventTypeIsTheLastEventField() {
    assertThat(event("event: a\nevent:b\ndata: x\n\n").eventType()).isEqualTo("b");
    assertThat(event("event\ndata: x\n\n").eventType()).isEmpty();
    assertThat(event("event:\ndata: x\n\n").eventType()).isEmpty();
    assertThat(event("data: x\n\n").eventType()).isNull();
    assertThat(event("eventx: y\ndata: x\n\n").eventType()).isNull();
    assertThat(event("event: response.completed\r\ndata: {}\r\n\r\n").eventType()).isEqualTo("response.completed");
    assertThat(event("event: \u00e9v\u00e9nement\ndata: x\n\n").eventType()).isEqualTo("\u00e9v\u00e9nement");
  }

  @Test
  void eventWithoutDataLines() {
    SseEvent e = event("event: ping\nid: 3\n\n");

    assertThat(e.hasData()).isFalse();
    assertThat(e.dataLineCount()).isZero();
    assertThat(e.payloadLength()).isZero();
    assertThat(e.payloadString()).isEmpty();
    assertThat(e.isDone()).isFalse();
    assertThat(e.mayContainUsage()).isFalse();
    assertThatThrownBy(() -> e.rawOffset(0)).isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> e.patchedRaw(0, 0, new byte[0])).isInstanceOf(IllegalStateException.class);
  }

  @Test
  void streamInitialBomIsKeptInRawButNotInTheFieldName() {
    SseEvent e = event(concat(BOM, utf8("data: x\n\n")));

    assertThat(e.rawBytes()).isEqualTo(concat(BOM, utf8("data: x\n\n")));
    assertThat(e.payloadString()).isEqualTo("x");
    assertThat(e.rawOffset(0)).isEqualTo(9);

    SseEvent typed = event(concat(BOM, utf8("event: t\ndata: y\n\n")));
    assertThat(typed.eventType()).isEqualTo("t");
    assertThat(typed.payloadString()).isEqualTo("y");
  }

  @Test
  void payloadIsDecodedAsUtf8() {
    SseEvent e = event("data: {\"c\":\"h\u00e9 \ud83d\ude00\"}\n\n");

    assertThat(e.payloadString()).isEqualTo("{\"c\":\"h\u00e9 \ud83d\ude00\"}");
    assertThat(e.payloadBytes()).isEqualTo(utf8("{\"c\":\"h\u00e9 \ud83d\ude00\"}"));
  }

  @Test
  void isDoneOnlyForAnExactDonePayload() {
    assertThat(event("data: [DONE]\n\n").isDone()).isTrue();
    assertThat(event("data:[DONE]\r\n\r\n").isDone()).isTrue();
    assertThat(event("event: end\ndata: [DONE]\n\n").isDone()).isTrue();
    assertThat(event("data: [DONE]").isDone()).isTrue();
    assertThat(event("data: [DONE] \n\n").isDone()).isFalse();
    assertThat(event("data: [done]\n\n").isDone()).isFalse();
    assertThat(event("data: [DONE]\ndata: x\n\n").isDone()).isFalse();
    assertThat(event("data: {\"usage\":null}\n\n").isDone()).isFalse();
  }

  @ParameterizedTest(name = "{0} -> {2}")
  @CsvSource(delimiter = '|', quoteCharacter = '\'', value = {
    "'data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1}}' | 1 | true",
    "'data: \"usage\"'                                       | 1 | true",
    "'data: {\"a\":\"usage\"}'                               | 1 | true",
    "'data: {\"usages\":1}'                                  | 1 | false",
    "'data: {\"Usage\":1}'                                   | 1 | false",
    "'data: usage'                                           | 1 | false",
    "'data: \"usage'                                         | 1 | false",
    "'data: [DONE]'                                          | 1 | false",
    "'data: {\"usa\ndata: ge\":1}'                           | 2 | false",
    "': \"usage\"\ndata: {}'                                 | 1 | false",
    "'data: {}\ndata: {\"usage\":{}}'                        | 2 | true",
  })
  void mayContainUsageLooksForTheQuotedKeyInThePayloadOnly(String lines, int dataLines, boolean expected) {
    SseEvent e = event(lines + "\n\n");
    assertThat(e.dataLineCount()).isEqualTo(dataLines);

    assertThat(e.mayContainUsage()).isEqualTo(expected);
  }

  @Test
  void rawOffsetForASingleDataLine() {
    SseEvent e = event("data: abc \n\n");

    assertThat(e.rawOffset(0)).isEqualTo(6);
    assertThat(e.rawOffset(3)).isEqualTo(9);
    assertThat(e.rawOffset(4)).isEqualTo(10); // payload end: where the line terminator starts
    assertThatThrownBy(() -> e.rawOffset(5)).isInstanceOf(IndexOutOfBoundsException.class);
    assertThatThrownBy(() -> e.rawOffset(-1)).isInstanceOf(IndexOutOfBoundsException.class);
  }

  @Test
  void rawOffsetForSeveralDataLines() {
    // raw:  d a t a :   a b \r \n d  a  t  a  :  c  d  \n \n
    // idx:  0 1 2 3 4 5 6 7 8  9  10 11 12 13 14 15 16 17 18
    SseEvent e = event("data: ab\r\ndata:cd\n\n");

    assertThat(e.payloadString()).isEqualTo("ab\ncd");
    assertThat(e.rawOffset(0)).isEqualTo(6);
    assertThat(e.rawOffset(1)).isEqualTo(7);
    assertThat(e.rawOffset(2)).isEqualTo(8); // the joining newline maps to the end of line one
    assertThat(e.rawOffset(3)).isEqualTo(15);
    assertThat(e.rawOffset(4)).isEqualTo(16);
    assertThat(e.rawOffset(5)).isEqualTo(17);
  }

  @Test
  void rawOffsetWithEmptyDataLinesAndOtherFieldsInBetween() {
    // data:\n event: t\n data\n data: x\n\n   -> payload "\n\nx"
    SseEvent e = event("data:\nevent: t\ndata\ndata: x\n\n");

    assertThat(e.payloadString()).isEqualTo("\n\nx");
    assertThat(e.rawOffset(0)).isEqualTo(5); // end of "data:"
    assertThat(e.rawOffset(1)).isEqualTo(19); // end of "data" (after "event: t\n")
    assertThat(e.rawOffset(2)).isEqualTo(26); // the x
    assertThat(e.rawArray()[26]).isEqualTo((byte) 'x');
  }

  /** Where the value of the first member {@code name} starts in the event's payload. */
  private static int valueOffset(SseEvent e, String name) {
    String member = "\"" + name + "\":";
    return e.payloadString().indexOf(member) + member.length();
  }

  @Test
  void patchingANumberThroughRawOffsetKeepsEverythingElse() {
    // G7: the decode worker reports cached_tokens 128; the context worker had 9.
    String before = "data: {\"choices\":[],\"model\":\"test-model\",\"usage\":{\"prompt_tokens\":128,"
        + "\"completion_tokens\":5,\"total_tokens\":133,\"prompt_tokens_details\":{\"cached_tokens\":128}}} \n\n";
    SseEvent e = event(before);
    int at = valueOffset(e, "cached_tokens");

    byte[] patched = e.patchedRaw(at, at + 3, utf8("9"));

    assertThat(new String(patched, StandardCharsets.UTF_8)).isEqualTo(before.replace(
        "\"cached_tokens\":128", "\"cached_tokens\":9"));
    assertThat(e.rawString()).isEqualTo(before); // the event is unchanged
    // The same edit done by hand through rawOffset.
    int rawAt = e.rawOffset(at);
    assertThat(new String(e.rawArray(), rawAt, 3, StandardCharsets.UTF_8)).isEqualTo("128");
  }

  @Test
  void patchingSeveralRangesWithLongerAndShorterReplacements() {
    String before = "data: {\"usage\":{\"prompt_tokens\":7,\"total_tokens\":12,"
        + "\"prompt_tokens_details\":{\"cached_tokens\":1000}}}\r\n\r\n";
    SseEvent e = event(before);
    int prompt = valueOffset(e, "prompt_tokens");
    int total = valueOffset(e, "total_tokens");
    int cached = valueOffset(e, "cached_tokens");

    byte[] patched = e.patchedRaw(List.of(
        new SseEvent.Patch(prompt, prompt + 1, utf8("186")),
        new SseEvent.Patch(total, total + 2, utf8("194")),
        new SseEvent.Patch(cached, cached + 4, utf8("64"))));

    assertThat(new String(patched, StandardCharsets.UTF_8)).isEqualTo(
        "data: {\"usage\":{\"prompt_tokens\":186,\"total_tokens\":194,"
            + "\"prompt_tokens_details\":{\"cached_tokens\":64}}}\r\n\r\n");
  }

  @Test
  void patchingInsideTheSecondOfSeveralDataLines() {
    String before = "event: x\r\ndata: {\"usage\":\r\ndata: {\"cached_tokens\":128}}\r\n\r\n";
    SseEvent e = event(before);
    String p = e.payloadString();
    assertThat(p).isEqualTo("{\"usage\":\n{\"cached_tokens\":128}}");
    int at = p.indexOf("128");

    byte[] patched = e.patchedRaw(at, at + 3, utf8("7"));

    assertThat(new String(patched, StandardCharsets.UTF_8))
        .isEqualTo("event: x\r\ndata: {\"usage\":\r\ndata: {\"cached_tokens\":7}}\r\n\r\n");
  }

  @Test
  void insertionAtAJoiningNewlineLandsAtTheEndOfThatLine() {
    SseEvent e = event("data: a\ndata: b\n\n");

    assertThat(new String(e.patchedRaw(1, 1, utf8("Z")), StandardCharsets.UTF_8))
        .isEqualTo("data: aZ\ndata: b\n\n");
    assertThat(new String(e.patchedRaw(3, 3, utf8("Y")), StandardCharsets.UTF_8))
        .isEqualTo("data: a\ndata: bY\n\n");
  }

  @Test
  void invalidPatchesAreRejected() {
    SseEvent e = event("data: abc\ndata: def\n\n");

    assertThatThrownBy(() -> e.patchedRaw(2, 5, utf8("x")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("line break");
    assertThatThrownBy(() -> e.patchedRaw(0, 1, utf8("a\nb")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("line terminator");
    assertThatThrownBy(() -> e.patchedRaw(0, 1, utf8("a\rb")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("line terminator");
    assertThatThrownBy(() -> e.patchedRaw(5, 8, utf8("x")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("past the payload");
    assertThatThrownBy(() -> e.patchedRaw(List.of(
        new SseEvent.Patch(4, 5, utf8("x")), new SseEvent.Patch(0, 1, utf8("y")))))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("sorted");
    assertThatThrownBy(() -> e.patchedRaw(List.of(
        new SseEvent.Patch(0, 2, utf8("x")), new SseEvent.Patch(1, 3, utf8("y")))))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("overlap");
    assertThatThrownBy(() -> new SseEvent.Patch(3, 2, utf8("x"))).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new SseEvent.Patch(-1, 2, utf8("x"))).isInstanceOf(IllegalArgumentException.class);
    assertThat(e.rawString()).isEqualTo("data: abc\ndata: def\n\n");
  }

  @Test
  void rawAccessorsAgree() throws IOException {
    SseEvent e = event("data: x\r\n\r\n");
    ByteArrayOutputStream out = new ByteArrayOutputStream();

    e.writeRawTo(out);
    byte[] copy = e.rawBytes();
    copy[0] = 'X';

    assertThat(out.toByteArray()).isEqualTo(utf8("data: x\r\n\r\n"));
    assertThat(e.rawArray()).isEqualTo(utf8("data: x\r\n\r\n"));
    assertThat(e.rawLength()).isEqualTo(11);
    assertThat(e.payloadByteAt(0)).isEqualTo((byte) 'x');
    assertThatThrownBy(() -> e.payloadByteAt(1)).isInstanceOf(IndexOutOfBoundsException.class);
    assertThat(e.toString()).contains("data: x\\r\\n\\r\\n");
  }
}
