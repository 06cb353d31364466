package io.disaggusage.extproc.sse;

import static io.disaggusage.extproc.sse.SseTestSupport.concatRaw;
import static io.disaggusage.extproc.sse.SseTestSupport.describe;
import static io.disaggusage.extproc.sse.SseTestSupport.frameAt;
import static io.disaggusage.extproc.sse.SseTestSupport.frameDirect;
import static io.disaggusage.extproc.sse.SseTestSupport.normalize;
import static io.disaggusage.extproc.sse.SseTestSupport.randomCuts;
import static io.disaggusage.extproc.sse.SseTestSupport.reference;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.sse.SseTestSupport.Desc;
import io.disaggusage.extproc.sse.SseTestSupport.Framed;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.function.Function;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Chunk-boundary invariance: every split of every corpus stream yields the same items as feeding the
 * stream whole, and the whole-stream result matches an independent reference framer.
 */
class SseFramerChunkingTest {

  private static final int NO_CAP = 1 << 20;
  /** Streams up to this size get every pair of split points; longer ones a window of pairs. */
  private static final int ALL_PAIRS_MAX_LENGTH = 400;
  private static final int PAIR_WINDOW = 48;
  private static final int RANDOM_SPLITS = 3000;
  private static final long BASE_SEED = 0x55E_F4A3E5L;

  static Stream<SseTestSupport.Stream> corpus() {
    return SseTestSupport.corpus().stream();
  }

  private static long seedFor(SseTestSupport.Stream s, long salt) {
    return BASE_SEED ^ (s.name().hashCode() * 0x9E3779B97F4A7C15L) ^ salt;
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("corpus")
  void wholeStreamMatchesReferenceFramerAndRebuildsInput(SseTestSupport.Stream s) {
    List<SseItem> items = SseFramer.frameAll(s.bytes(), NO_CAP);

    assertThat(concatRaw(items)).isEqualTo(s.bytes());
    assertThat(describe(items)).containsExactlyElementsOf(reference(s.bytes(), NO_CAP));
    for (SseItem item : items) {
      if (item instanceof SseEvent e) {
        assertOffsetsConsistent(e);
      }
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("corpus")
  void everySingleSplitPointGivesTheSameItems(SseTestSupport.Stream s) {
    byte[] b = s.bytes();
    List<Desc> whole = describe(SseFramer.frameAll(b, NO_CAP));
    for (int i = 0; i <= b.length; i++) {
      Framed f = frameAt(b, NO_CAP, i);
      assertThat(describe(f.items())).as("%s split at %d", s.name(), i).isEqualTo(whole);
      assertThat(concatRaw(f.items())).as("%s split at %d", s.name(), i).isEqualTo(b);
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("corpus")
  void everyPairOfSplitPointsGivesTheSameItems(SseTestSupport.Stream s) {
    byte[] b = s.bytes();
    List<Desc> whole = describe(SseFramer.frameAll(b, NO_CAP));
    int window = b.length <= ALL_PAIRS_MAX_LENGTH ? b.length : PAIR_WINDOW;
    int checked = 0;
    for (int i = 0; i <= b.length; i++) {
      for (int j = i; j <= Math.min(b.length, i + window); j++) {
        Framed f = frameAt(b, NO_CAP, i, j);
        List<Desc> got = describe(f.items());
        if (!got.equals(whole)) {
          assertThat(got).as("%s split at %d and %d", s.name(), i, j).isEqualTo(whole);
        }
        if (!Arrays.equals(concatRaw(f.items()), b)) {
          assertThat(concatRaw(f.items())).as("%s split at %d and %d", s.name(), i, j).isEqualTo(b);
        }
        checked++;
      }
    }
    assertThat(checked).isGreaterThan(b.length);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("corpus")
  void randomMultiSplitsGiveTheSameItems(SseTestSupport.Stream s) {
    assertRandomCutsGiveTheWholeItems(s, 1, RANDOM_SPLITS, cuts -> frameAt(s.bytes(), NO_CAP, cuts).items());
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("corpus")
  void oneByteChunksGiveTheSameItems(SseTestSupport.Stream s) {
    byte[] b = s.bytes();
    int[] cuts = IntStream.rangeClosed(1, b.length).toArray();

    Framed f = frameAt(b, NO_CAP, cuts);

    assertThat(describe(f.items())).isEqualTo(describe(SseFramer.frameAll(b, NO_CAP)));
    assertThat(concatRaw(f.items())).isEqualTo(b);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("corpus")
  void directByteBuffersGiveTheSameItems(SseTestSupport.Stream s) {
    assertRandomCutsGiveTheWholeItems(s, 2, 200, cuts -> frameDirect(s.bytes(), NO_CAP, cuts));
  }

  /**
   * Frames {@code s} cut at {@code iterations} random sets of points (seeded by {@code salt}) with
   * {@code framer} and holds each result to the items of the uncut stream.
   */
  private static void assertRandomCutsGiveTheWholeItems(
      SseTestSupport.Stream s, long salt, int iterations, Function<int[], List<SseItem>> framer) {
    byte[] b = s.bytes();
    List<Desc> whole = describe(SseFramer.frameAll(b, NO_CAP));
    long seed = seedFor(s, salt);
    Random rnd = new Random(seed);
    for (int n = 0; n < iterations; n++) {
      int[] cuts = randomCuts(rnd, b.length);
      List<Desc> got = describe(framer.apply(cuts));
      if (!got.equals(whole)) {
        assertThat(got).as("%s seed %d iteration %d cuts %s", s.name(), seed, n, Arrays.toString(cuts))
            .isEqualTo(whole);
      }
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("corpus")
  void smallCapsMatchReferenceForEverySplit(SseTestSupport.Stream s) {
    byte[] b = s.bytes();
    for (int cap : new int[] {8, 9, 13, 24, 60, 100, 200}) {
      List<Desc> expected = reference(b, cap);
      long expectedOversize = expected.stream().filter(d -> d.kind().equals("OVERSIZE")).count();
      Framed whole = frameAt(b, cap);
      assertThat(normalize(describe(whole.items()))).as("%s cap %d whole", s.name(), cap).isEqualTo(expected);
      assertThat(whole.oversizeCount()).isEqualTo(expectedOversize);
      for (int i = 0; i <= b.length; i++) {
        Framed f = frameAt(b, cap, i);
        assertThat(normalize(describe(f.items()))).as("%s cap %d split at %d", s.name(), cap, i).isEqualTo(expected);
        assertThat(concatRaw(f.items())).isEqualTo(b);
        assertThat(f.maxHeld()).isLessThanOrEqualTo(cap);
        assertThat(f.oversizeCount()).isEqualTo(expectedOversize);
      }
      long seed = seedFor(s, 3 + cap);
      Random rnd = new Random(seed);
      for (int n = 0; n < 300; n++) {
        int[] cuts = randomCuts(rnd, b.length);
        Framed f = frameAt(b, cap, cuts);
        assertThat(normalize(describe(f.items())))
            .as("%s cap %d seed %d iteration %d cuts %s", s.name(), cap, seed, n, Arrays.toString(cuts))
            .isEqualTo(expected);
        assertThat(f.maxHeld()).isLessThanOrEqualTo(cap);
      }
    }
  }

  @Test
  void randomStreamsMatchReferenceUnderRandomChunkingAndCaps() {
    long seed = BASE_SEED ^ 0xF00DL;
    Random rnd = new Random(seed);
    int[] caps = {8, 11, 16, 32, 64, NO_CAP};
    for (int n = 0; n < 4000; n++) {
      byte[] b = SseTestSupport.randomStream(rnd);
      int cap = caps[rnd.nextInt(caps.length)];
      int[] cuts = randomCuts(rnd, b.length);
      Framed f = frameAt(b, cap, cuts);
      String what = String.format("seed %d iteration %d cap %d stream %s cuts %s", seed, n, cap,
          SseEvent.escape(b, 0, b.length, 400), Arrays.toString(cuts));
      assertThat(normalize(describe(f.items()))).as(what).isEqualTo(reference(b, cap));
      assertThat(concatRaw(f.items())).as(what).isEqualTo(b);
      assertThat(f.maxHeld()).as(what).isLessThanOrEqualTo(cap);
      for (SseItem item : f.items()) {
        if (item instanceof SseEvent e) {
          assertOffsetsConsistent(e);
        }
      }
    }
  }

  /** Every payload byte maps to the same byte in raw; joining newlines map to a line terminator. */
  static void assertOffsetsConsistent(SseEvent e) {
    byte[] raw = e.rawArray();
    if (!e.hasData()) {
      assertThat(e.payloadLength()).isZero();
      return;
    }
    for (int p = 0; p < e.payloadLength(); p++) {
      byte pb = e.payloadByteAt(p);
      byte rb = raw[e.rawOffset(p)];
      if (pb == '\n') {
        assertThat(rb == '\n' || rb == '\r').as("joiner at payload %d of %s", p, e).isTrue();
      } else {
        assertThat(rb).as("payload %d of %s", p, e).isEqualTo(pb);
      }
    }
    int endOffset = e.rawOffset(e.payloadLength());
    assertThat(endOffset).isBetween(0, raw.length);
    if (endOffset < raw.length) {
      assertThat(raw[endOffset] == '\n' || raw[endOffset] == '\r').as("payload end of %s", e).isTrue();
    }
  }
}
