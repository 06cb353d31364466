package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.ScenarioVectors;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.testkit.ScenarioVectors.Vector;
import io.disaggusage.extproc.scenario.VectorRunner.Splits;
import io.disaggusage.extproc.driver.Chunking;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.stream.Collectors;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Whole-pipeline chunk invariance: for every engine vector, whatever the chunking of each of the four
 * bodies (every single split point, thousands of random multi-splits with 1-byte chunks and empty
 * final chunks), the client gets exactly the same bytes — the corrected generation response and the
 * untouched context response — and the exchange ends rewritten with nothing left in the store.
 *
 * <p>Random splits start from {@code -Dchunks.seed=N} (default: the clock) and the failing iteration's
 * seed is in the assertion message; {@code -Dchunks.random=N} sets the iterations per vector.
 */
class ChunkInvarianceTest extends DirectServiceFixture {
  static final int RANDOM_PER_VECTOR = Integer.getInteger("chunks.random", 1500);
  static final long BASE_SEED = Long.getLong("chunks.seed", System.nanoTime());
  static final int[] MAX_CHUNK = {1, 2, 3, 5, 8, 16, 64, 256, 4096};

  /**
   * Every engine vector, the TensorRT-LLM ones again with MessagePack request bodies, and the
   * Anthropic Messages ones.
   */
  static List<Vector> vectors() {
    List<Vector> vectors = new ArrayList<>(ScenarioVectors.all());
    vectors.add(ScenarioVectors.trtResponsesHandoff());
    vectors.addAll(ScenarioVectors.trtMsgpack());
    vectors.addAll(ScenarioVectors.messages());
    return vectors;
  }

  void check(Vector v, Splits splits, String what) {
    VectorRunner.Outcome o = VectorRunner.run(envoy, v, splits);
    String as = v.name() + " " + what;
    assertThat(o.problem()).as(as).isNull();
    assertThat(o.generation().clientBody()).as(as).isEqualTo(v.expectedGeneration());
    assertThat(o.generation().metadata("disagg_usage", "outcome")).as(as).isEqualTo("rewritten");
    if (o.context() != null) {
      assertThat(o.context().clientBody()).as(as).isEqualTo(v.context().responseBody());
    }
    assertThat(store.size()).as(as + ": store drained").isZero();
    assertThat(store.waiters()).as(as + ": no waiter left").isZero();
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("vectors")
  void everySingleSplitPointOfEveryBody(Vector v) {
    check(v, Splits.generationOnly(Chunking.whole()), "whole");
    check(v, Splits.generationOnly(Chunking.bytewise().withEmptyFinalChunk()), "bytewise+empty");
    int n = v.generation().responseBody().length;
    for (int k = 1; k < n; k++) {
      Chunking at = k % 2 == 0 ? Chunking.at(k) : Chunking.at(k).withEmptyFinalChunk();
      check(v, Splits.generationOnly(at), "generation response split at " + k);
    }
    int r = v.generation().requestBody().length;
    for (int k = 1; k < r; k++) {
      check(v, new Splits(Chunking.whole(), Chunking.whole(), Chunking.at(k), Chunking.fixed(97)),
          "generation request split at " + k);
    }
    if (v.context() != null) {
      int c = v.context().responseBody().length;
      for (int k = 1; k < c; k++) {
        check(v, new Splits(Chunking.whole(), Chunking.at(k), Chunking.whole(), Chunking.fixed(61)),
            "context response split at " + k);
      }
      int q = v.context().requestBody().length;
      for (int k = 1; k < q; k++) {
        check(v, new Splits(Chunking.at(k).withEmptyFinalChunk(), Chunking.whole(), Chunking.whole(), Chunking.whole()),
            "context request split at " + k);
      }
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("vectors")
  void randomMultiSplitsOfEveryBody(Vector v) {
    for (int i = 0; i < RANDOM_PER_VECTOR; i++) {
      long seed = BASE_SEED + 31L * i + v.name().hashCode();
      Random rnd = new Random(seed);
      Chunking[] c = new Chunking[4];
      List<String> shape = new ArrayList<>();
      for (int b = 0; b < 4; b++) {
        int max = MAX_CHUNK[rnd.nextInt(MAX_CHUNK.length)];
        long s = rnd.nextLong();
        boolean empty = rnd.nextBoolean();
        Chunking random = Chunking.random(s, max);
        c[b] = empty ? random.withEmptyFinalChunk() : random;
        shape.add("max=" + max + (empty ? "+empty" : ""));
      }
      Splits splits = new Splits(c[0], c[1], c[2], c[3]);
      check(v, splits, "random split, seed " + seed + " (-Dchunks.seed=" + BASE_SEED + ", iteration " + i + ") "
          + shape + " generation chunks " + sizes(c[3].split(v.generation().responseBody())));
    }
  }

  static String sizes(List<byte[]> chunks) {
    return chunks.stream().map(b -> Integer.toString(b.length)).collect(Collectors.joining(",", "[", "]"));
  }

}
