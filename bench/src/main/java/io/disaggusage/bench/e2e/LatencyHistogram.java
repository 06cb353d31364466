package io.disaggusage.bench.e2e;

import java.util.concurrent.atomic.AtomicLongArray;

/**
 * A lock-free log-linear histogram of nanosecond values: 32 sub-buckets per power of two, so a
 * reported percentile is within about 3 % of the true value.
 */
public final class LatencyHistogram {
  private static final int SUB_BITS = 5;
  private static final int SUB = 1 << SUB_BITS;
  private final AtomicLongArray counts = new AtomicLongArray(64 * SUB);

  public void record(long nanos) {
    counts.incrementAndGet(index(Math.max(0, nanos)));
  }

  public void reset() {
    for (int i = 0; i < counts.length(); i++) {
      counts.set(i, 0);
    }
  }

  public void addTo(LatencyHistogram other) {
    for (int i = 0; i < counts.length(); i++) {
      long c = counts.get(i);
      if (c != 0) {
        other.counts.addAndGet(i, c);
      }
    }
  }

  /** A new histogram holding the samples of both: the percentiles of the pooled samples. */
  public static LatencyHistogram merged(LatencyHistogram x, LatencyHistogram y) {
    LatencyHistogram sum = new LatencyHistogram();
    x.addTo(sum);
    y.addTo(sum);
    return sum;
  }

  public long count() {
    long n = 0;
    for (int i = 0; i < counts.length(); i++) {
      n += counts.get(i);
    }
    return n;
  }

  /** The value at quantile {@code q} (0..1), as the middle of its bucket; 0 when empty. */
  public long percentile(double q) {
    long total = count();
    if (total == 0) {
      return 0;
    }
    long rank = (long) Math.ceil(q * total);
    long seen = 0;
    for (int i = 0; i < counts.length(); i++) {
      seen += counts.get(i);
      if (seen >= rank && counts.get(i) > 0) {
        long lo = lower(i);
        long hi = lower(i + 1);
        return (lo + hi) / 2;
      }
    }
    return lower(counts.length() - 1);
  }

  static int index(long v) {
    if (v < SUB) {
      return (int) v;
    }
    int e = 63 - Long.numberOfLeadingZeros(v);
    int sub = (int) ((v >>> (e - SUB_BITS)) & (SUB - 1));
    return (e - SUB_BITS + 1) * SUB + sub;
  }

  static long lower(int index) {
    if (index < SUB) {
      return index;
    }
    int e = index / SUB + SUB_BITS - 1;
    int sub = index % SUB;
    return ((long) (SUB | sub)) << (e - SUB_BITS);
  }
}
