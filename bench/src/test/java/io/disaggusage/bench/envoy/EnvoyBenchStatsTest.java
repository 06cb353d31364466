package io.disaggusage.bench.envoy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.disaggusage.bench.e2e.LatencyHistogram;
import java.time.Duration;
import java.time.Instant;
import org.junit.jupiter.api.Test;

/** The statistics of the run through real Envoy, without Envoy: pooling, windows, the access-log waits. */
class EnvoyBenchStatsTest {
  private static final long MS = 1_000_000L;

  @Test
  void mergedHistogramsHoldThePooledSamples() {
    LatencyHistogram fast = new LatencyHistogram();
    LatencyHistogram slow = new LatencyHistogram();
    for (int i = 1; i <= 99; i++) {
      fast.record(i * MS / 100); // 10 us .. 0.99 ms
    }
    slow.record(50 * MS);
    LatencyHistogram pooled = LatencyHistogram.merged(fast, slow);

    assertThat(pooled.count()).isEqualTo(100);
    assertThat(fast.count()).as("the inputs stay as they were").isEqualTo(99);
    assertThat(slow.count()).isEqualTo(1);
    // the one slow sample is the pooled p100, not the p99: a run of 99 samples and a run of 1 weigh by their size
    assertThat(pooled.percentile(1.0)).isCloseTo(50 * MS, withinPercent(3));
    assertThat(pooled.percentile(0.99)).isCloseTo(990_000L, withinPercent(3));
    assertThat(pooled.percentile(0.50)).isCloseTo(500_000L, withinPercent(3));
    assertThat(LatencyHistogram.merged(new LatencyHistogram(), new LatencyHistogram()).percentile(0.99)).isZero();
  }

  @Test
  void combinedRunsPoolTheLatenciesAndKeepTheBestRateAndCpu() {
    RunStats x = run(100, 2_000, 3 * MS, 10);
    RunStats y = run(120, 3_000, 5 * MS, 30);
    RunStats both = RunStats.combine(x, y);

    assertThat(both.flowsPerSecond()).isEqualTo(120);
    assertThat(both.envoyCpuPerFlow()).isEqualTo(2_000);
    assertThat(both.ttftSamples()).isEqualTo(40);
    // 10 samples at 3 ms and 30 at 5 ms: the median is 5 ms, the best run's would have been 3 ms
    assertThat(both.ttftP50()).isCloseTo(5 * MS, withinPercent(3));
    assertThat(both.checked()).isEqualTo(x.checked() + y.checked());
    assertThat(both.windowSeconds()).isEqualTo(20.0);
    assertThat(both.waits().inWindow()).isEqualTo(2);
    assertThat(both.waits().of("request_header_latency_us").count()).isEqualTo(2);
  }

  @Test
  void extProcWaitsReadGenerationLinesOfTheWindowOnly() {
    long from = Instant.parse("2026-12-07T02:00:00.000Z").toEpochMilli();
    ExtProcWaits waits = new ExtProcWaits(from, from + 10_000);
    waits.accept(line("2026-12-07T02:00:01.500Z", "generation", "120", "-", "80", "4500"));
    waits.accept(line("2026-12-07T02:00:02.000Z", "context", "99", "-", "99", "-"));
    waits.accept(line("2026-12-07T01:59:59.999Z", "generation", "7", "-", "7", "7")); // before the window
    waits.accept(line("2026-12-07T02:00:10.000Z", "generation", "7", "-", "7", "7")); // at its end: out
    waits.accept("[2026-12-07T02:00:03.000Z] POST /v1/completions 200 cluster=generation duration=6ms xp_request_header_latency_us=-");
    waits.accept("garbage");

    assertThat(waits.generationLines()).isEqualTo(4);
    assertThat(waits.inWindow()).isEqualTo(2);
    assertThat(waits.of("request_header_latency_us").count()).isEqualTo(1);
    assertThat(waits.of("request_header_latency_us").percentile(0.5)).isCloseTo(120_000L, withinPercent(3));
    assertThat(waits.of("request_body_total_latency_us").count()).as("\"-\": no such call").isZero();
    assertThat(waits.of("response_header_latency_us").percentile(0.5)).isCloseTo(80_000L, withinPercent(3));
    assertThat(waits.of("response_body_total_latency_us").percentile(0.5)).isCloseTo(4_500_000L, withinPercent(3));
  }

  @Test
  void minSamplesStretchTheEstimatedWindowUpToMaxWindow() {
    EnvoyBenchOptions o = EnvoyBenchOptions.parse();
    assertThat(o.minSamples()).isEqualTo(200);
    assertThat(o.maxWindow()).isEqualTo(Duration.ofSeconds(90));
    // 20 ms x 300 events: a flow lasts 6 s; 16 lanes give 2.67 TTFT samples a second, 200 need 75 s
    assertThat(o.window(Duration.ofMillis(20), 16)).isEqualTo(Duration.ofSeconds(75));
    assertThat(o.window(Duration.ofMillis(20), 64)).isEqualTo(Duration.ofMillis(18_750));
    assertThat(o.window(Duration.ofMillis(20), 256)).isEqualTo(Duration.ofSeconds(10));
    assertThat(o.window(Duration.ZERO, 16)).isEqualTo(Duration.ofSeconds(10));
    assertThat(EnvoyBenchOptions.parse("--min-samples", "1000").window(Duration.ofMillis(20), 16))
        .isEqualTo(Duration.ofSeconds(90));
    assertThat(EnvoyBenchOptions.parse("--min-samples", "0").estimate())
        .isEqualTo(EnvoyBenchOptions.parse().estimate().minus(Duration.ofMillis((65_000 + 8_750) * 2 * 3)));
    EnvoyBenchOptions quick = EnvoyBenchOptions.parse("--quick", "--max-window", "5s");
    assertThat(quick.minSamples()).isEqualTo(10);
    assertThat(quick.maxWindow()).isEqualTo(Duration.ofSeconds(5));
    assertThatThrownBy(() -> EnvoyBenchOptions.parse("--min-samples")).hasMessageContaining("needs a value");
    assertThatThrownBy(() -> EnvoyBenchOptions.parse("--bogus")).hasMessageContaining("unknown option --bogus");
    assertThatThrownBy(() -> EnvoyBenchOptions.parse("--min-samples", "-1")).hasMessageContaining("--min-samples");
  }

  private static RunStats run(double flowsPerSecond, double envoyCpu, long ttft, int samples) {
    LatencyHistogram h = new LatencyHistogram();
    for (int i = 0; i < samples; i++) {
      h.record(ttft);
    }
    long from = Instant.parse("2026-12-07T02:00:00.000Z").toEpochMilli();
    ExtProcWaits waits = new ExtProcWaits(from, from + 10_000);
    waits.accept(line("2026-12-07T02:00:01.000Z", "generation", "100", "-", "50", "3000"));
    return new RunStats(flowsPerSecond, h, new LatencyHistogram(), envoyCpu, 0, 0, 0, 0, samples, samples, 0,
        new long[10], 10.0, waits);
  }

  private static String line(String start, String cluster, String... micros) {
    return "[" + start + "] POST /v1/chat/completions 200 cluster=" + cluster + " duration=6ms usage_outcome=-"
        + " model=- xp_request_header_latency_us=" + micros[0] + " xp_request_body_total_latency_us=" + micros[1]
        + " xp_response_header_latency_us=" + micros[2] + " xp_response_body_total_latency_us=" + micros[3];
  }

  private static org.assertj.core.data.Percentage withinPercent(int percent) {
    return org.assertj.core.data.Percentage.withPercentage(percent);
  }
}
