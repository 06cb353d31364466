package io.disaggusage.bench.envoy;

import java.util.Arrays;
import java.util.SplittableRandom;

/**
 * What one setup adds over another, from requests paired by turn: the median of the per-turn
 * differences, a bootstrap 95 % interval for it, and the same median over the pairs whose two requests
 * took the engines' same path. The real vLLM pair answers a P/D request in one of two times here (about
 * 35–45 ms, or about 77 ms, whatever the proxy in front), so a pair with one request of each kind differs
 * by some 35 ms either way; how many such pairs fall on each side moves the plain median by a fraction of
 * a millisecond from run to run. A difference larger than {@link #SAME_PATH_NANOS} cannot be an ext_proc
 * server's, whose whole wait is a few milliseconds: such a pair is counted, and left out of the second
 * median.
 *
 * @param median the median of the differences, nanoseconds
 * @param low the bootstrap interval's lower end
 * @param high its upper end
 * @param samePathMedian the median over the pairs within {@link #SAME_PATH_NANOS}
 * @param samePath how many pairs that is
 * @param pairs how many pairs in all
 */
record PairedDifferences(long median, long low, long high, long samePathMedian, int samePath, int pairs) {
  /** Pairs further apart than this took different paths through the engines. */
  static final long SAME_PATH_NANOS = 10_000_000;

  /** Bootstrap resamples; the interval is their 2.5th and 97.5th percentile, nearest rank. */
  private static final int RESAMPLES = 2000;
  /** Fixed: the interval of a given run is reproducible. */
  private static final long SEED = 35;

  /** {@code x[i] - y[i]} over the turns {@code i}. */
  static PairedDifferences of(long[] x, long[] y) {
    long[] d = differences(x, y);
    long[] close = Arrays.stream(d).filter(v -> Math.abs(v) < SAME_PATH_NANOS).toArray();
    long[] resampled = new long[RESAMPLES];
    SplittableRandom random = new SplittableRandom(SEED);
    long[] sample = new long[d.length];
    for (int r = 0; r < RESAMPLES; r++) {
      for (int i = 0; i < sample.length; i++) {
        sample[i] = d[random.nextInt(d.length)];
      }
      resampled[r] = median(sample);
    }
    Arrays.sort(resampled);
    return new PairedDifferences(
        median(d),
        resampled[(int) (RESAMPLES * 0.025) - 1],
        resampled[(int) (RESAMPLES * 0.975) - 1],
        close.length == 0 ? 0 : median(close),
        close.length,
        d.length);
  }

  /** {@code x[i] - y[i]} for every {@code i}. */
  static long[] differences(long[] x, long[] y) {
    long[] d = new long[x.length];
    for (int i = 0; i < d.length; i++) {
      d[i] = x[i] - y[i];
    }
    return d;
  }

  /** The nearest-rank median. */
  static long median(long[] values) {
    long[] sorted = values.clone();
    Arrays.sort(sorted);
    return sorted[Math.max(0, (int) Math.ceil(sorted.length / 2.0) - 1)];
  }
}
