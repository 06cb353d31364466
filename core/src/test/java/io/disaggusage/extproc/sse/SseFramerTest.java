package io.disaggusage.extproc.sse;

import static io.disaggusage.extproc.sse.SseTestSupport.concatRaw;
import static io.disaggusage.extproc.sse.SseTestSupport.describe;
import static io.disaggusage.extproc.testing.Text.utf8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** Targeted behaviour of {@link SseFramer}: when items are emitted, the CR rule, finish(), API edges. */
class SseFramerTest {

  private static final int CAP = 1 << 16;

  private final List<SseItem> items = new ArrayList<>();
  private final SseFramer framer = new SseFramer(CAP, items::add);

  private void feed(String s) {
    framer.feed(utf8(s));
  }

  private List<String> raws() {
    return items.stream().map(SseItem::rawString).toList();
  }

  private SseEvent eventAt(int i) {
    return (SseEvent) items.get(i);
  }

  @Test
  void eventIsEmittedAsSoonAsItsBlankLineArrives() {
    feed("data: a\n\n");
    assertThat(raws()).containsExactly("data: a\n\n");

    feed("data: b\n");
    assertThat(items).hasSize(1);
    assertThat(framer.heldBytes()).isEqualTo(8);

    feed("\n");
    assertThat(raws()).containsExactly("data: a\n\n", "data: b\n\n");
    assertThat(framer.heldBytes()).isZero();
  }

  @Test
  void severalEventsInOneChunkComeOutInOrderAndTheRestIsCarried() {
    feed("data: a\n\nevent: e\ndata: b\n\ndata: c");

    assertThat(raws()).containsExactly("data: a\n\n", "event: e\ndata: b\n\n");
    assertThat(eventAt(1).eventType()).isEqualTo("e");
    assertThat(framer.heldBytes()).isEqualTo(7);

    feed("c\n\n");
    assertThat(raws()).endsWith("data: cc\n\n");
    assertThat(eventAt(2).payloadString()).isEqualTo("cc");
  }

  @Test
  void crlfBlankLineSplitBetweenCrAndLfIsHeldUntilTheNextByte() {
    feed("data: a\r\n\r");
    assertThat(items).isEmpty();
    assertThat(framer.heldBytes()).isEqualTo(10);

    feed("\ndata: b");
    assertThat(raws()).containsExactly("data: a\r\n\r\n");
    assertThat(eventAt(0).terminated()).isTrue();
  }

  @Test
  void crOnlyBlankLineAtChunkEndIsEmittedWhenTheNextByteIsNotLf() {
    feed("data: a\r\r");
    assertThat(items).isEmpty();

    feed("d");
    assertThat(raws()).containsExactly("data: a\r\r");
    assertThat(framer.heldBytes()).isEqualTo(1);

    feed("ata: b\r\r\r");
    assertThat(raws()).containsExactly("data: a\r\r", "data: b\r\r");
    assertThat(framer.heldBytes()).isEqualTo(1); // a lone CR blank line, waiting for a possible LF

    feed("\n");
    assertThat(raws()).containsExactly("data: a\r\r", "data: b\r\r", "\r\n");
    assertThat(items.get(2)).isInstanceOf(SsePassThrough.class);
  }

  @Test
  void crInsideAnEventAtChunkEndJoinsAnLfFromTheNextChunk() {
    feed("data: a\r");
    feed("\ndata: b\n\n");

    assertThat(raws()).containsExactly("data: a\r\ndata: b\n\n");
    assertThat(eventAt(0).payloadString()).isEqualTo("a\nb");
    assertThat(eventAt(0).dataLineCount()).isEqualTo(2);
  }

  @Test
  void emptyChunksChangeNothing() {
    framer.feed(new byte[0]);
    feed("data: a\n");
    framer.feed(new byte[10], 3, 0);
    feed("\n");
    framer.feed(new byte[0]);
    framer.finish();

    assertThat(raws()).containsExactly("data: a\n\n");
    assertThat(framer.bytesFed()).isEqualTo(9);
  }

  @Test
  void blankLinesOutsideEventsArePassedThroughOneByOne() {
    feed("\n\r\n\rdata: a\n\n\n");

    assertThat(raws()).containsExactly("\n", "\r\n", "\r", "data: a\n\n", "\n");
    assertThat(items).map(SseItem::getClass).containsExactly(SsePassThrough.class, SsePassThrough.class,
        SsePassThrough.class, SseEvent.class, SsePassThrough.class);
    assertThat(((SsePassThrough) items.get(0)).kind()).isEqualTo(SsePassThrough.Kind.INTER_EVENT);
    assertThat(((SsePassThrough) items.get(0)).isOversize()).isFalse();
  }

  @Test
  void commentOnlyBlockIsAnEventWithoutData() {
    feed(": keep-alive\n\n");

    assertThat(items).hasSize(1);
    assertThat(eventAt(0).hasData()).isFalse();
    assertThat(eventAt(0).rawString()).isEqualTo(": keep-alive\n\n");
  }

  @Test
  void finishDeliversAnEventWithoutTrailingNewlineAsUnterminated() {
    feed("data: a\n\ndata: {\"usage\":{\"completion_tokens\":3}}");
    framer.finish();

    assertThat(raws()).containsExactly("data: a\n\n", "data: {\"usage\":{\"completion_tokens\":3}}");
    assertThat(eventAt(0).terminated()).isTrue();
    assertThat(eventAt(1).terminated()).isFalse();
    assertThat(eventAt(1).payloadString()).isEqualTo("{\"usage\":{\"completion_tokens\":3}}");
    assertThat(eventAt(1).mayContainUsage()).isTrue();
    assertThat(framer.heldBytes()).isZero();
    assertThat(framer.isFinished()).isTrue();
  }

  /**
   * A stream that ends without the blank line of its last event: {@code finish()} delivers the held
   * bytes as that event, terminated only when all it waited for was the LF of a CRLF.
   */
  @ParameterizedTest(name = "{0}")
  @MethodSource("lastEventsAtFinish")
  void finishDeliversTheHeldEvent(String caseName, String stream, boolean terminated, String eventType, String payload) {
    feed(stream);
    framer.finish();

    assertThat(raws()).containsExactly(stream);
    assertThat(eventAt(0).terminated()).isEqualTo(terminated);
    assertThat(eventAt(0).eventType()).isEqualTo(eventType);
    assertThat(eventAt(0).payloadString()).isEqualTo(payload);
    assertThat(eventAt(0).isDone()).isEqualTo(payload.equals("[DONE]"));
  }

  static Stream<Arguments> lastEventsAtFinish() {
    return Stream.of(
        Arguments.of("a single trailing newline: unterminated", "data: [DONE]\n", false, null, "[DONE]"),
        Arguments.of("ending in a line's CR: unterminated", "event: x\rdata: y\r", false, "x", "y"),
        Arguments.of("waiting only for a possible LF: terminated", "data: a\r\r", true, null, "a"));
  }

  @Test
  void finishWithNothingHeldEmitsNothingAndIsIdempotent() {
    feed("data: a\n\n");
    framer.finish();
    framer.finish();

    assertThat(items).hasSize(1);
  }

  @Test
  void feedAfterFinishIsRejected() {
    framer.finish();

    assertThatThrownBy(() -> feed("data: a\n\n")).isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> framer.feed(new byte[0])).isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> framer.feed(ByteBuffer.allocateDirect(0))).isInstanceOf(IllegalStateException.class);
  }

  @Test
  void theSinkMayNotCallBackIntoTheFramer() {
    List<Throwable> errors = new ArrayList<>();
    SseFramer[] self = new SseFramer[1];
    self[0] = new SseFramer(CAP, item -> {
      try {
        self[0].feed(utf8("x"));
      } catch (IllegalStateException e) {
        errors.add(e);
      }
      try {
        self[0].finish();
      } catch (IllegalStateException e) {
        errors.add(e);
      }
    });

    self[0].feed(utf8("data: a\n\n"));

    assertThat(errors).hasSize(2).allSatisfy(e -> assertThat(e).hasMessageContaining("re-entrant"));
    assertThat(self[0].isFinished()).isFalse();
  }

  @Test
  void constructorAndFeedValidateArguments() {
    assertThatThrownBy(() -> new SseFramer(SseFramer.MIN_MAX_EVENT_BYTES - 1, i -> { }))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new SseFramer(CAP, null)).isInstanceOf(NullPointerException.class);
    assertThatThrownBy(() -> framer.feed(new byte[4], 3, 2)).isInstanceOf(IndexOutOfBoundsException.class);
    assertThatThrownBy(() -> framer.feed(new byte[4], -1, 1)).isInstanceOf(IndexOutOfBoundsException.class);
    assertThat(new SseFramer(SseFramer.MIN_MAX_EVENT_BYTES, i -> { }).maxEventBytes())
        .isEqualTo(SseFramer.MIN_MAX_EVENT_BYTES);
  }

  @Test
  void feedsAnArraySliceWithoutTouchingBytesOutsideIt() {
    byte[] chunk = utf8("XXdata: a\n\nYY");

    framer.feed(chunk, 2, 9);

    assertThat(raws()).containsExactly("data: a\n\n");
    assertThat(framer.bytesFed()).isEqualTo(9);
  }

  @Test
  void byteBuffersOfEveryKindAreConsumed() {
    byte[] stream = utf8("data: a\r\n\r\nevent: e\ndata: b\n\ndata: c");
    List<SseTestSupport.Desc> expected = describe(SseFramer.frameAll(stream, CAP));

    ByteBuffer heapSlice = ByteBuffer.wrap(SseTestSupport.concat(utf8("ZZZ"), stream), 3, stream.length).slice();
    ByteBuffer readOnly = ByteBuffer.wrap(stream).asReadOnlyBuffer();
    ByteBuffer direct = ByteBuffer.allocateDirect(stream.length).put(stream).flip();
    ByteBuffer bigDirect = ByteBuffer.allocateDirect(40_000);
    byte[] big = new byte[40_000];
    Arrays.fill(big, (byte) 'x');
    System.arraycopy(stream, 0, big, 0, stream.length);
    bigDirect.put(big).flip();

    for (ByteBuffer b : List.of(heapSlice, readOnly, direct)) {
      List<SseItem> got = new ArrayList<>();
      SseFramer f = new SseFramer(CAP, got::add);
      f.feed(b);
      f.finish();
      assertThat(b.hasRemaining()).isFalse();
      assertThat(describe(got)).isEqualTo(expected);
    }
    List<SseItem> got = new ArrayList<>();
    SseFramer f = new SseFramer(CAP, got::add);
    f.feed(bigDirect);
    f.finish();
    assertThat(concatRaw(got)).isEqualTo(big);
    assertThat(f.bytesFed()).isEqualTo(big.length);
  }

  @Test
  void goldenG11SplitInsideTheFieldName() {
    String usage = "data: {\"usage\":{\"prompt_tokens\":64,\"prompt_tokens_details\":{\"cached_tokens\":49}}}\n\n";
    feed("da");
    assertThat(items).isEmpty();
    feed(usage.substring(2) + "data: [DONE]\n");
    framer.finish();

    assertThat(raws()).containsExactly(usage, "data: [DONE]\n");
    assertThat(eventAt(0).mayContainUsage()).isTrue();
    assertThat(eventAt(0).payloadString()).startsWith("{\"usage\":");
    assertThat(eventAt(1).isDone()).isTrue();
    assertThat(eventAt(1).terminated()).isFalse();
  }

  @Test
  void responsesApiNamedEventsWithoutDone() {
    feed("event: response.created\ndata: {\"type\":\"response.created\"}\n\n"
        + "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n"
        + "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":"
        + "{\"input_tokens\":98,\"output_tokens\":8,\"total_tokens\":106}}}\n\n");
    framer.finish();

    assertThat(items).hasSize(3).allSatisfy(i -> assertThat(i).isInstanceOf(SseEvent.class));
    assertThat(items).map(i -> ((SseEvent) i).eventType())
        .containsExactly("response.created", "response.output_text.delta", "response.completed");
    assertThat(items).map(i -> ((SseEvent) i).mayContainUsage()).containsExactly(false, false, true);
    assertThat(items).map(i -> ((SseEvent) i).isDone()).containsOnly(false);
  }

  @Test
  void trtllmPerfMetricsEventAndSpaceBeforeBlankLine() {
    feed("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]} \n\n"
        + "event: trtllm.perf_metrics\ndata: {\"timing\":[1]}\n\n");

    assertThat(items).hasSize(2);
    assertThat(eventAt(0).payloadString()).isEqualTo("{\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]} ");
    assertThat(eventAt(0).eventType()).isNull();
    assertThat(eventAt(1).eventType()).isEqualTo("trtllm.perf_metrics");
    assertThat(eventAt(1).payloadString()).isEqualTo("{\"timing\":[1]}");
  }

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void aLargeEventFedOneByteAtATimeIsScannedOnce() {
    // A rescan from the event start on every byte would be quadratic (about 10^10 steps here).
    int size = 150_000;
    byte[] stream = new byte[size];
    Arrays.fill(stream, (byte) 'x');
    byte[] head = utf8("data: ");
    System.arraycopy(head, 0, stream, 0, head.length);
    stream[size - 2] = '\n';
    stream[size - 1] = '\n';
    List<SseItem> got = new ArrayList<>();
    SseFramer f = new SseFramer(size, got::add);

    for (int i = 0; i < size; i++) {
      f.feed(stream, i, 1);
    }

    assertThat(got).hasSize(1);
    assertThat(((SseEvent) got.get(0)).payloadLength()).isEqualTo(size - 8);
    assertThat(got.get(0).rawArray()).isEqualTo(stream);
  }

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void largeStreamsOfSmallEventsAndLongLinesStayLinear() {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < 50_000; i++) {
      sb.append("data: {\"choices\":[{\"delta\":{\"content\":\"").append(i).append("\"}}]}\n\n");
    }
    byte[] stream = utf8(sb.toString());
    List<SseItem> got = new ArrayList<>();
    SseFramer f = new SseFramer(4096, got::add);

    f.feed(stream); // one big chunk with many events
    f.finish();

    assertThat(got).hasSize(50_000);
    assertThat(concatRaw(got)).isEqualTo(stream);

    List<SseItem> chunked = new ArrayList<>();
    SseFramer g = new SseFramer(4096, chunked::add);
    for (int off = 0; off < stream.length; off += 1000) {
      g.feed(stream, off, Math.min(1000, stream.length - off));
    }
    g.finish();
    assertThat(describe(chunked)).isEqualTo(describe(got));
  }
}
