package io.disaggusage.bench.envoy;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class PairedDifferencesTest {
  private static final long MS = 1_000_000L;

  /**
   * Engines that answer in 40 ms or, one request in six, 77 ms, whatever is in front; the setup under
   * test adds 2 ms to each request. Pairs across the two paths differ by about ±35 ms and are left out
   * of the second median, which finds the 2 ms; the interval holds the plain median.
   */
  @Test
  void pairsAcrossTheEnginesTwoPathsAreLeftOutOfTheSamePathMedian() {
    SplittableRandom random = new SplittableRandom(7);
    int n = 600;
    long[] bare = new long[n];
    long[] with = new long[n];
    for (int i = 0; i < n; i++) {
      bare[i] = engine(random) + random.nextLong(MS / 2);
      with[i] = engine(random) + 2 * MS + random.nextLong(MS / 2);
    }
    PairedDifferences p = PairedDifferences.of(with, bare);

    assertThat(p.pairs()).isEqualTo(n);
    assertThat(p.samePath()).isBetween(n / 2, n - 1);
    assertThat(p.samePathMedian()).isBetween(2 * MS - MS / 4, 2 * MS + MS / 4);
    assertThat(p.low()).isLessThanOrEqualTo(p.median());
    assertThat(p.high()).isGreaterThanOrEqualTo(p.median());
    assertThat(PairedDifferences.of(with, bare)).as("the same data, the same interval").isEqualTo(p);
  }

  @Test
  void identicalSetupsAddNothing() {
    long[] same = {40 * MS, 41 * MS, 77 * MS, 39 * MS};
    PairedDifferences p = PairedDifferences.of(same, same);
    assertThat(p.median()).isZero();
    assertThat(p.low()).isZero();
    assertThat(p.high()).isZero();
    assertThat(p.samePathMedian()).isZero();
    assertThat(p.samePath()).isEqualTo(4);
  }

  private static long engine(SplittableRandom random) {
    return random.nextInt(6) == 0 ? 77 * MS : 40 * MS;
  }
}
