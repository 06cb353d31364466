package io.disaggusage.extproc.sse;

import static io.disaggusage.extproc.sse.SseTestSupport.concatRaw;
import static io.disaggusage.extproc.sse.SseTestSupport.describe;
import static io.disaggusage.extproc.sse.SseTestSupport.frameAt;
import static io.disaggusage.extproc.sse.SseTestSupport.normalize;
import static io.disaggusage.extproc.testing.Text.utf8;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.sse.SseTestSupport.Framed;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** Events larger than {@code maxEventBytes} are passed through in pieces and counted. */
class SseFramerOversizeTest {

  private static final int CAP = 32;

  private final List<SseItem> items = new ArrayList<>();
  private final SseFramer framer = new SseFramer(CAP, items::add);

  private void feed(String s) {
    framer.feed(utf8(s));
    assertThat(framer.heldBytes()).isLessThanOrEqualTo(CAP);
  }

  /** A data event of exactly {@code size} raw bytes ending in {@code \n\n}. */
  private static String eventOfSize(int size) {
    return "data: " + "x".repeat(size - 8) + "\n\n";
  }

  private static String summary(SseItem item) {
    if (item instanceof SsePassThrough p) {
      return (p.isOversize() ? (p.startsOversizeEvent() ? "OVERSIZE-START " : "OVERSIZE ") : "INTER ")
          + p.rawString();
    }
    return "EVENT " + item.rawString();
  }

  private List<String> summaries() {
    return items.stream().map(SseFramerOversizeTest::summary).toList();
  }

  @Test
  void eventsUpToTheCapAreFramedAndOneByteMoreIsOversize() {
    for (int size : new int[] {CAP - 1, CAP}) {
      List<SseItem> got = SseFramer.frameAll(utf8(eventOfSize(size)), CAP);
      assertThat(got).singleElement().isInstanceOf(SseEvent.class);
    }
    List<SseItem> got = SseFramer.frameAll(utf8(eventOfSize(CAP + 1)), CAP);
    assertThat(got).singleElement().isInstanceOfSatisfying(SsePassThrough.class, p -> {
      assertThat(p.isOversize()).isTrue();
      assertThat(p.startsOversizeEvent()).isTrue();
      assertThat(p.rawString()).isEqualTo(eventOfSize(CAP + 1));
    });
  }

  @Test
  void oversizeEventInOneChunkIsOnePieceAndFramingResumesAfterIt() {
    String big = "event: big\ndata: " + "y".repeat(100) + "\n\n";

    feed(big + "data: a\n\n" + "data: [DONE]\n\n");

    assertThat(summaries()).containsExactly("OVERSIZE-START " + big, "EVENT data: a\n\n", "EVENT data: [DONE]\n\n");
    assertThat(framer.oversizeEventCount()).isEqualTo(1);
  }

  @Test
  void chunksStraddlingTheCapArePassedThroughAsTheyArrive() {
    String body = "data: " + "z".repeat(60); // 66 bytes, then the blank line
    feed(body.substring(0, 20));
    assertThat(items).isEmpty();
    assertThat(framer.heldBytes()).isEqualTo(20);

    feed(body.substring(20, 40)); // 40 bytes > cap: everything so far goes out now
    assertThat(summaries()).containsExactly("OVERSIZE-START " + body.substring(0, 40));
    assertThat(framer.heldBytes()).isZero();

    feed(body.substring(40, 50));
    assertThat(summaries()).endsWith("OVERSIZE " + body.substring(40, 50));

    feed(body.substring(50) + "\n\ndata: after\n\n");
    assertThat(summaries()).containsExactly(
        "OVERSIZE-START " + body.substring(0, 40),
        "OVERSIZE " + body.substring(40, 50),
        "OVERSIZE " + body.substring(50) + "\n\n",
        "EVENT data: after\n\n");
    assertThat(framer.oversizeEventCount()).isEqualTo(1);
  }

  @Test
  void oneByteChunksOfAnOversizeEventStartWithCapPlusOneBytes() {
    String stream = eventOfSize(50) + "data: b\n\n";
    for (char ch : stream.toCharArray()) {
      feed(String.valueOf(ch));
    }
    framer.finish();

    assertThat(summary(items.get(0))).isEqualTo("OVERSIZE-START " + stream.substring(0, CAP + 1));
    assertThat(items.subList(1, 50 - CAP)).allSatisfy(i -> {
      assertThat(((SsePassThrough) i).isOversize()).isTrue();
      assertThat(((SsePassThrough) i).startsOversizeEvent()).isFalse();
      assertThat(i.rawLength()).isEqualTo(1);
    });
    assertThat(summaries()).endsWith("EVENT data: b\n\n");
    assertThat(items).hasSize(50 - CAP + 1);
    assertThat(new String(concatRaw(items))).isEqualTo(stream);
  }

  @Test
  void oversizeEventEndingInALoneCrTakesAnLfFromTheNextChunk() {
    String big = "data: " + "q".repeat(40) + "\r\r";
    feed(big);
    assertThat(summaries()).containsExactly("OVERSIZE-START " + big);

    feed("\ndata: n\r\n\r\n");

    assertThat(summaries()).containsExactly("OVERSIZE-START " + big, "OVERSIZE \n", "EVENT data: n\r\n\r\n");
  }

  @Test
  void oversizeEventEndingInALoneCrFollowedByAnotherEventLeavesNoEmptyPiece() {
    String big = "data: " + "q".repeat(40) + "\r\r";
    feed(big);
    feed("data: n\r\r");
    framer.finish();

    assertThat(summaries()).containsExactly("OVERSIZE-START " + big, "EVENT data: n\r\r");
    assertThat(items).allSatisfy(i -> assertThat(i.rawLength()).isPositive());
  }

  @Test
  void eventOneByteOverTheCapOnlyThroughItsFinalLfIsOversizeForEveryChunking() {
    // CAP bytes up to and including the final CR, then the LF: CAP + 1 bytes in all.
    String stream = "data: " + "w".repeat(CAP - 9) + "\r\n\r\n" + "data: t\n\n";
    byte[] b = utf8(stream);
    int eventLength = CAP + 1;

    for (int cut = 0; cut <= b.length; cut++) {
      Framed f = frameAt(b, CAP, cut);
      assertThat(normalize(describe(f.items())))
          .as("split at %d", cut)
          .extracting(SseTestSupport.Desc::kind)
          .containsExactly("OVERSIZE", "EVENT");
      assertThat(f.items().get(0).rawLength()).as("split at %d", cut).isEqualTo(eventLength);
      assertThat(f.oversizeCount()).isEqualTo(1);
      assertThat(f.maxHeld()).isLessThanOrEqualTo(CAP);
    }
  }

  @Test
  void streamEndingInsideAnOversizeEventLeavesNothingForFinish() {
    String partial = "data: " + "p".repeat(50);
    feed("data: a\n\n" + partial);
    int before = items.size();

    framer.finish();

    assertThat(items).hasSize(before);
    assertThat(summaries()).containsExactly("EVENT data: a\n\n", "OVERSIZE-START " + partial);
    assertThat(framer.oversizeEventCount()).isEqualTo(1);
  }

  @Test
  void everyOversizeEventIsCountedOnce() {
    String big = eventOfSize(40);
    String stream = big + "data: s\n\n" + big + big + "\n" + "data: [DONE]\n\n";
    byte[] b = utf8(stream);

    for (int[] cuts : List.of(new int[0], IntStream.rangeClosed(1, b.length).toArray(), new int[] {35, 36, 90})) {
      Framed f = frameAt(b, CAP, cuts);
      assertThat(f.oversizeCount()).isEqualTo(3);
      assertThat(f.items()).filteredOn(i -> i instanceof SsePassThrough p && p.startsOversizeEvent()).hasSize(3);
      assertThat(f.items()).filteredOn(i -> i instanceof SseEvent).extracting(SseItem::rawString)
          .containsExactly("data: s\n\n", "data: [DONE]\n\n");
      assertThat(f.items()).filteredOn(i -> i instanceof SsePassThrough p && !p.isOversize())
          .extracting(SseItem::rawString).containsExactly("\n");
      assertThat(concatRaw(f.items())).isEqualTo(b);
    }
  }

  @Test
  void oversizeEventWithMixedLineEndingsEndsAtItsBlankLine() {
    String big = "data: aaaaaaaaaa\rdata: bbbbbbbbbb\r\ndata: cccccccccc\n\r";
    String stream = big + "data: d\n\n";
    byte[] b = utf8(stream);

    for (int cut = 0; cut <= b.length; cut++) {
      Framed f = frameAt(b, CAP, cut);
      assertThat(normalize(describe(f.items()))).extracting(SseTestSupport.Desc::raw)
          .as("split at %d", cut).containsExactly(big, "data: d\n\n");
    }
  }

  @Test
  void heldBytesNeverExceedTheCapWhileALongStreamIsPassedThrough() {
    SseFramer f = new SseFramer(1024, items::add);
    byte[] chunk = utf8("x".repeat(4096));
    f.feed(utf8("data: "));
    for (int i = 0; i < 4096; i++) { // 16 MiB through one oversize event
      f.feed(chunk);
      assertThat(f.heldBytes()).isZero();
    }
    f.feed(utf8("\n\ndata: ok\n\n"));
    f.finish();

    assertThat(items).hasSize(4096 + 2);
    assertThat(items.get(items.size() - 1).rawString()).isEqualTo("data: ok\n\n");
    assertThat(f.oversizeEventCount()).isEqualTo(1);
  }
}
