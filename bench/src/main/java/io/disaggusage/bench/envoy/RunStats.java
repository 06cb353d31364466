package io.disaggusage.bench.envoy;

/**
 * One setup at one concurrency and delay, for one run (or the best of several). Times in nanoseconds;
 * CPU per completed flow; resident memory of the ext_proc process before the run and at the window's end
 * (0 without one); checked, as expected and problems count every generation response of the run;
 * {@code timeline}: flows completed in each whole second of the window.
 */
record RunStats(
    double flowsPerSecond, long ttftP50, long ttftP99, long gapP50, long gapP99, double envoyCpuPerFlow,
    double extProcCpuPerFlow, double benchCpuPerFlow, long rssBefore, long rssAtEnd, long checked,
    long asExpected, long problems, long[] timeline) {

  /**
   * The best of two runs, metric by metric: on a shared machine disturbances only ever make a number
   * worse, so the better of two is the closer to what the setup can do. Counts are summed.
   */
  static RunStats best(RunStats x, RunStats y) {
    RunStats lowerRss = x.rssAtEnd <= y.rssAtEnd ? x : y;
    RunStats faster = x.flowsPerSecond >= y.flowsPerSecond ? x : y;
    return new RunStats(
        Math.max(x.flowsPerSecond, y.flowsPerSecond),
        Math.min(x.ttftP50, y.ttftP50),
        Math.min(x.ttftP99, y.ttftP99),
        Math.min(x.gapP50, y.gapP50),
        Math.min(x.gapP99, y.gapP99),
        Math.min(x.envoyCpuPerFlow, y.envoyCpuPerFlow),
        Math.min(x.extProcCpuPerFlow, y.extProcCpuPerFlow),
        Math.min(x.benchCpuPerFlow, y.benchCpuPerFlow),
        lowerRss.rssBefore,
        lowerRss.rssAtEnd,
        x.checked + y.checked,
        x.asExpected + y.asExpected,
        x.problems + y.problems,
        faster.timeline);
  }
}
