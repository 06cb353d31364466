package io.disaggusage.bench.envoy;

import io.disaggusage.bench.e2e.LatencyHistogram;

/**
 * One setup at one concurrency and delay, for one run (or the runs of a cell combined). Times in
 * nanoseconds; {@code ttft} and {@code gap}: the latencies of the window; CPU per completed flow; resident
 * memory of the ext_proc process before the run and at the window's end (0 without one); checked, as
 * expected and problems count every generation response of the run; {@code timeline}: flows completed in
 * each whole second of the window; {@code windowSeconds}: how long the window lasted (summed when
 * combined); {@code waits}: Envoy's ext_proc call latencies on the generation leg.
 */
record RunStats(
    double flowsPerSecond, LatencyHistogram ttft, LatencyHistogram gap, double envoyCpuPerFlow,
    double extProcCpuPerFlow, double benchCpuPerFlow, long rssBefore, long rssAtEnd, long checked,
    long asExpected, long problems, long[] timeline, double windowSeconds, ExtProcWaits waits) {

  long ttftP50() {
    return ttft.percentile(0.50);
  }

  long ttftP99() {
    return ttft.percentile(0.99);
  }

  /** What the TTFT percentiles rest on: flows whose first body bytes arrived in the window. */
  long ttftSamples() {
    return ttft.count();
  }

  long gapP50() {
    return gap.percentile(0.50);
  }

  long gapP99() {
    return gap.percentile(0.99);
  }

  /**
   * Two runs of one setup and cell combined. Flows/s, CPU and memory: the better of the two, metric by
   * metric (on a shared machine disturbances only ever make such a number worse, so the better of two is the
   * closer to what the setup can do). Latencies (TTFT, gap, Envoy's ext_proc waits): the samples of both
   * pooled, so a percentile rests on every sample of the cell rather than on the luckier run's few. Counts
   * are summed.
   */
  static RunStats combine(RunStats x, RunStats y) {
    RunStats lowerRss = x.rssAtEnd <= y.rssAtEnd ? x : y;
    RunStats faster = x.flowsPerSecond >= y.flowsPerSecond ? x : y;
    return new RunStats(
        Math.max(x.flowsPerSecond, y.flowsPerSecond),
        LatencyHistogram.merged(x.ttft, y.ttft),
        LatencyHistogram.merged(x.gap, y.gap),
        Math.min(x.envoyCpuPerFlow, y.envoyCpuPerFlow),
        Math.min(x.extProcCpuPerFlow, y.extProcCpuPerFlow),
        Math.min(x.benchCpuPerFlow, y.benchCpuPerFlow),
        lowerRss.rssBefore,
        lowerRss.rssAtEnd,
        x.checked + y.checked,
        x.asExpected + y.asExpected,
        x.problems + y.problems,
        faster.timeline,
        x.windowSeconds + y.windowSeconds,
        ExtProcWaits.merged(x.waits, y.waits));
  }
}
