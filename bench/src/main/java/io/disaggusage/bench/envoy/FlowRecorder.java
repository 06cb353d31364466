package io.disaggusage.bench.envoy;

import io.disaggusage.bench.e2e.LatencyHistogram;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What the client saw during one run. Latencies and completed flows count only inside the measurement
 * window (warm-up and drain left out); every generation response of the run, window or not, is checked.
 */
final class FlowRecorder {
  final LatencyHistogram ttft = new LatencyHistogram();
  final LatencyHistogram gap = new LatencyHistogram();
  final AtomicLong flowsInWindow = new AtomicLong();
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
