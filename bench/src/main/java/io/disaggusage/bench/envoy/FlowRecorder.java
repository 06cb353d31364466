package io.disaggusage.bench.envoy;

import io.disaggusage.bench.e2e.LatencyHistogram;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * What the client saw during one run. Latencies and completed flows count only inside the measurement
 * window (warm-up and drain left out); every generation response of the run, window or not, is checked.
 */
final class FlowRecorder {
  static final int TIMELINE_SECONDS = 120;
  final LatencyHistogram ttft = new LatencyHistogram();
  final LatencyHistogram gap = new LatencyHistogram();
  final AtomicLong flowsInWindow = new AtomicLong();
  /** Flows completed in each second of the window (the first {@value #TIMELINE_SECONDS} seconds). */
  final AtomicLongArray perSecond = new AtomicLongArray(TIMELINE_SECONDS);
  final AtomicLong checked = new AtomicLong();
  final AtomicLong asExpected = new AtomicLong();
  private final Map<String, AtomicLong> problems = new ConcurrentHashMap<>();
  private final boolean expectCorrected;
  private volatile long windowStart = Long.MAX_VALUE;
  private volatile long windowEnd = Long.MAX_VALUE;

  FlowRecorder(boolean expectCorrected) {
    this.expectCorrected = expectCorrected;
  }

  /** The measurement window, in {@link System#nanoTime()}. */
  void window(long start, long end) {
    windowStart = start;
    windowEnd = end;
  }

  boolean inWindow(long nanos) {
    return nanos >= windowStart && nanos < windowEnd;
  }

  /** A flow completed at {@code nanos}: counted when inside the window, and in its second's bucket. */
  void completed(long nanos) {
    if (inWindow(nanos)) {
      flowsInWindow.incrementAndGet();
      long second = (nanos - windowStart) / 1_000_000_000L;
      if (second < TIMELINE_SECONDS) {
        perSecond.incrementAndGet((int) second);
      }
    }
  }

  /** Flows completed in each whole second of a window of {@code seconds}. */
  long[] timeline(int seconds) {
    long[] out = new long[Math.min(seconds, TIMELINE_SECONDS)];
    for (int i = 0; i < out.length; i++) {
      out[i] = perSecond.get(i);
    }
    return out;
  }

  boolean expectCorrected() {
    return expectCorrected;
  }

  void problem(String what) {
    problem(what, 1);
  }

  void problem(String what, long times) {
    if (times > 0) {
      problems.computeIfAbsent(what, k -> new AtomicLong()).addAndGet(times);
    }
  }

  long problemCount() {
    return problems.values().stream().mapToLong(AtomicLong::get).sum();
  }

  /** Each kind of problem and how often it happened (never a body: only what went wrong). */
  Map<String, Long> problems() {
    Map<String, Long> out = new TreeMap<>();
    problems.forEach((k, v) -> out.put(k, v.get()));
    return out;
  }
}
