package io.disaggusage.extproc.sse;

import static io.disaggusage.extproc.sse.SseTestSupport.describe;
import static io.disaggusage.extproc.sse.SseTestSupport.randomCuts;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.sse.SseTestSupport.Desc;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * {@link SseFramer#skim}: a chunk skimmed instead of fed delivers nothing, and changes nothing else —
 * every item completing in a fed chunk is delivered exactly as an all-feed run delivers it in that
 * chunk (an event's bytes from skimmed chunks included), and oversize events are counted alike.
 */
class SseFramerSkimTest {
  private static final long SEED = 0x5C1_3F00DL;

  static Stream<Object[]> cases() {
    List<Object[]> cases = new ArrayList<>();
    for (SseTestSupport.Stream s : SseTestSupport.corpus()) {
      for (int cap : new int[] {1 << 20, 24, 8}) {
        cases.add(new Object[] {s.name(), s.bytes(), cap});
      }
    }
    Random rnd = new Random(SEED);
    for (int i = 0; i < 200; i++) {
      cases.add(new Object[] {"random-" + i, SseTestSupport.randomStream(rnd), rnd.nextBoolean() ? 1 << 20 : 8 + rnd.nextInt(40)});
    }
    return cases.stream();
  }

  @ParameterizedTest(name = "{0} cap {2}")
  @MethodSource("cases")
  void skimmedChunksDeliverNothingAndFedChunksDeliverWhatFeedingDelivers(String name, byte[] stream, int cap) {
    Random rnd = new Random(SEED ^ name.hashCode() ^ cap);
    for (int trial = 0; trial < 40; trial++) {
      int[] cuts = randomCuts(rnd, stream.length);
      boolean[] skimmed = new boolean[cuts.length + 1];
      for (int i = 0; i < skimmed.length; i++) {
        skimmed[i] = rnd.nextBoolean();
      }
      List<List<Desc>> expected = run(stream, cap, cuts, new boolean[skimmed.length]);
      List<List<Desc>> got = run(stream, cap, cuts, skimmed);
      for (int i = 0; i < skimmed.length; i++) {
        assertThat(got.get(i))
            .as("%s cuts %s skimmed %s, chunk %d", name, Arrays.toString(cuts), Arrays.toString(skimmed), i)
            .isEqualTo(skimmed[i] ? List.of() : expected.get(i));
      }
      assertThat(got.get(skimmed.length)).as("finish").isEqualTo(expected.get(skimmed.length));
      assertThat(got.get(skimmed.length + 1)).as("oversize events counted").isEqualTo(expected.get(skimmed.length + 1));
    }
  }

  private static final byte[] USAGE = "\"usage\"".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

  /**
   * {@link SseFramer#skimUntil}: it stops where the first needle wholly inside the chunk starts, and
   * framing then goes on exactly as if the chunk had been cut there, the part before skimmed.
   */
  @ParameterizedTest(name = "{0} cap {2}")
  @MethodSource("cases")
  void skimUntilStopsAtTheFirstNeedleAsIfTheChunkWereCutThere(String name, byte[] stream, int cap) {
    Random rnd = new Random(SEED ^ name.hashCode() ^ cap ^ 0x7E11);
    for (int trial = 0; trial < 40; trial++) {
      int[] cuts = randomCuts(rnd, stream.length);
      List<SseItem> sink = new ArrayList<>();
      SseFramer framer = new SseFramer(cap, sink::add);
      // The reference: every chunk with a needle cut again at the needle, its first part skimmed.
      List<Integer> refCuts = new ArrayList<>();
      List<Boolean> refSkim = new ArrayList<>();
      List<List<Desc>> got = new ArrayList<>();
      int prev = 0;
      for (int i = 0; i <= cuts.length; i++) {
        int cut = i < cuts.length ? cuts[i] : stream.length;
        byte[] chunk = Arrays.copyOfRange(stream, prev, cut);
        boolean watched = rnd.nextBoolean();
        if (watched) {
          int p = framer.skimUntil(chunk, USAGE, 4);
          int expectedStop = ByteSearch.indexOf(chunk, 0, chunk.length, USAGE, 0);
          assertThat(p).as("%s chunk %d", name, i).isEqualTo(expectedStop < 0 ? chunk.length : expectedStop);
          assertThat(sink).isEmpty();
          framer.feed(Arrays.copyOfRange(chunk, p, chunk.length));
          refCuts.add(prev + p);
          refSkim.add(true);
        } else {
          framer.feed(chunk);
        }
        got.add(describe(new ArrayList<>(sink)));
        sink.clear();
        if (i < cuts.length) {
          refCuts.add(cut);
        }
        refSkim.add(false);
        prev = cut;
      }
      framer.finish();
      got.add(describe(new ArrayList<>(sink)));
      boolean[] skim = new boolean[refSkim.size()];
      for (int k = 0; k < skim.length; k++) {
        skim[k] = refSkim.get(k);
      }
      List<List<Desc>> ref = run(stream, cap, refCuts.stream().mapToInt(Integer::intValue).toArray(), skim);
      List<List<Desc>> expected = new ArrayList<>();
      for (int k = 0; k < skim.length; k++) {
        if (!skim[k]) {
          expected.add(ref.get(k));
        }
      }
      expected.add(ref.get(skim.length)); // finish
      assertThat(got).as("%s cuts %s", name, Arrays.toString(cuts)).isEqualTo(expected);
      assertThat(framer.oversizeEventCount()).isEqualTo(Long.parseLong(ref.get(skim.length + 1).get(0).raw()));
    }
  }

  /**
   * Items delivered per chunk (skimmed or fed as flagged), the last list being those of finish(), then
   * the oversize count as a one-element list.
   */
  private static List<List<Desc>> run(byte[] stream, int cap, int[] cuts, boolean[] skimmed) {
    List<SseItem> sink = new ArrayList<>();
    SseFramer framer = new SseFramer(cap, sink::add);
    List<List<Desc>> perChunk = new ArrayList<>();
    int prev = 0;
    for (int i = 0; i <= cuts.length; i++) {
      int cut = i < cuts.length ? cuts[i] : stream.length;
      byte[] chunk = Arrays.copyOfRange(stream, prev, cut);
      if (skimmed[i]) {
        framer.skim(chunk);
      } else {
        framer.feed(chunk);
      }
      perChunk.add(describe(new ArrayList<>(sink)));
      sink.clear();
      prev = cut;
    }
    framer.finish();
    perChunk.add(describe(new ArrayList<>(sink)));
    perChunk.add(List.of(new Desc("OVERSIZE_COUNT", Long.toString(framer.oversizeEventCount()), true, null, null, 0, false)));
    return perChunk;
  }
}
