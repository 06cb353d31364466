package io.disaggusage.bench.envoy;

import io.disaggusage.bench.BenchHost;
import io.disaggusage.bench.envoy.EnvoyBench.Cell;
import io.disaggusage.bench.envoy.EnvoyBench.Result;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import java.time.Duration;
import java.util.Locale;
import java.util.Map;

/**
 * The Markdown the run prints: per-setup numbers, Envoy's ext_proc waits, the (c)-against-(b) ratios, memory,
 * correctness.
 */
final class EnvoyBenchReport {
  private EnvoyBenchReport() {}

  /** The line that says which JVM options the service ran with besides the README's; empty without any. */
  static String serviceJvmOptions(EnvoyBenchOptions o) {
    return o.serviceJvmOptions().isEmpty() ? "" : String.format(Locale.ROOT,
        "The service's JVM ran with %s before the README's options (--service-jvm-options): not as shipped.%n",
        String.join(" ", o.serviceJvmOptions()));
  }

  static String render(Result r) {
    EnvoyBenchOptions o = r.options();
    StringBuilder md = new StringBuilder();
    md.append("# Through a real Envoy\n\n");
    md.append(String.format(Locale.ROOT, "Envoy %s on the shipped deploy/envoy/envoy.yaml (Envoy's default worker"
            + " threads), %s, %s %s%s.%n", EnvoyChild.RELEASE, BenchHost.machine(), System.getProperty("java.vm.name"),
        System.getProperty("java.runtime.version"), o.quick() ? "; QUICK RUN: the numbers mean nothing" : ""));
    md.append(String.format(Locale.ROOT, "A flow: a vLLM prefill leg (JSON with usage) through the context listener,"
            + " then the decode leg through the generation listener streaming %d content events, the usage event and"
            + " [DONE]; closed loop. %d runs per setup and cell (setups take turns, the order reversed every other"
            + " round), each a window of %s s after %s s of warm-up (with a delay, plus one whole flow), the window"
            + " extended until it holds %d TTFT samples, to at most %s s. Flows/s and CPU: the best of the runs,"
            + " metric by metric; TTFT and gap percentiles: from the pooled samples of all the runs of the setup and"
            + " cell (their histograms merged), TTFT n samples.%n",
        o.events(), o.rounds(), seconds(o.duration()), seconds(o.warmup()), o.minSamples(), seconds(o.maxWindow())));
    md.append("TTFT: from writing the decode request to the first socket read that brings body bytes; gap: between"
        + " two such reads of one response; both at the client. CPU per completed flow from /proc/<pid>/stat:"
        + " Envoy, the ext_proc process, and the benchmark's own JVM (client and both workers).\n");
    md.append(serviceJvmOptions(o));
    firstRuns(md, r);
    restarts(md, r);
    for (Duration delay : o.delays()) {
      md.append(String.format(Locale.ROOT, "%n## Inter-token delay %d ms%n%n", delay.toMillis()));
      md.append("| flows open | setup | flows/s | TTFT n | TTFT p50 | TTFT p99 | gap p50 | gap p99 | Envoy CPU/flow"
          + " | ext_proc CPU/flow | client+workers CPU/flow |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
      for (Cell cell : r.cells()) {
        if (!cell.delay().equals(delay)) {
          continue;
        }
        for (Map.Entry<Setup, RunStats> e : cell.combined().entrySet()) {
          RunStats s = e.getValue();
          md.append(String.format(Locale.ROOT, "| %d | %s | %.0f | %d | %s | %s | %s | %s | %s | %s | %s |%n",
              cell.concurrency(), e.getKey().title(), s.flowsPerSecond(), s.ttftSamples(), time(s.ttftP50()), time(s.ttftP99()),
              time(s.gapP50()), time(s.gapP99()), time(s.envoyCpuPerFlow()),
              e.getKey().extProc() ? time(s.extProcCpuPerFlow()) : "-", time(s.benchCpuPerFlow())));
        }
      }
      extProcWaits(md, r, delay);
    }
    ratios(md, r);
    memory(md, r);
    soak(md, r);
    correctness(md, r);
    md.append(String.format(Locale.ROOT, "%ntotal time: %d s%n", r.elapsed().toSeconds()));
    return md.toString();
  }

  /**
   * What Envoy itself recorded waiting for its ext_proc processor on the generation leg at {@code delay}, per
   * call kind: the first token's profile (request headers, request body, response headers) and the body's.
   */
  private static void extProcWaits(StringBuilder md, Result r, Duration delay) {
    md.append(String.format(Locale.ROOT, "%n### Envoy's ext_proc waits, generation leg, %d ms%n%n", delay.toMillis()));
    md.append("How long Envoy waited for the processor, as its access log records it per request"
        + " (`%FILTER_STATE(envoy.filters.http.ext_proc:FIELD:…_latency_us)%`, microseconds; a body's is the sum"
        + " over its calls), for the generation requests that started in the windows, all runs pooled (n): request"
        + " headers, request body and response headers come before the first token, the response body after it.\n\n");
    md.append("| flows open | setup | n | req headers p50 | p99 | req body p50 | p99 | resp headers p50 | p99"
        + " | resp body p50 | p99 |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (Cell cell : r.cells()) {
      if (!cell.delay().equals(delay)) {
        continue;
      }
      for (Setup setup : new Setup[] {Setup.NULL, Setup.SERVICE}) {
        ExtProcWaits w = cell.combined().get(setup).waits();
        md.append(String.format(Locale.ROOT, "| %d | %s | %d |", cell.concurrency(), setup.title(), w.inWindow()));
        for (String field : ShippedBootstrap.EXT_PROC_LATENCIES) {
          md.append(' ').append(time(w.of(field).percentile(0.50))).append(" | ")
              .append(time(w.of(field).percentile(0.99))).append(" |");
        }
        md.append('\n');
      }
    }
  }

  /** Each setup's first run after start against its combined runs at the same cell. */
  private static void firstRuns(StringBuilder md, Result r) {
    Cell first = r.cells().get(0);
    md.append(String.format(Locale.ROOT, "%n## First run after start%n%nEach setup's first run (%d ms delay, %d flows"
            + " open) right after the processes started, before the measured rounds and not part of them: what a"
            + " fresh process costs (JIT; the null processor has no warm-up of its own). Problems of these runs and"
            + " of the restarts are listed after the next table only.%n%n| setup | flows/s first / best | TTFT p99 first / rounds | gap p99 first / rounds | problems |%n"
            + "|---|---|---|---|---|%n", first.delay().toMillis(), first.concurrency()));
    for (Map.Entry<Setup, RunStats> e : r.firstRuns().entrySet()) {
      RunStats f = e.getValue();
      RunStats b = first.combined().get(e.getKey());
      md.append(String.format(Locale.ROOT, "| %s | %.0f / %.0f | %s / %s | %s / %s | %d |%n", e.getKey().title(),
          f.flowsPerSecond(), b.flowsPerSecond(), time(f.ttftP99()), time(b.ttftP99()), time(f.gapP99()),
          time(b.gapP99()), f.problems()));
    }
  }

  /**
   * Each ext_proc's run right after a restart of it alone against its best at the same cell, second by
   * second: how long its own warm-up penalty lasts.
   */
  private static void restarts(StringBuilder md, Result r) {
    Cell first = r.cells().get(0);
    int seconds = (int) r.options().duration().toSeconds();
    md.append(String.format(Locale.ROOT, "%n## After a restart of the ext_proc alone%n%nEach ext_proc process"
            + " stopped and started again on its port while Envoy, the workers and the client stay warm, then"
            + " measured from the moment Envoy's health check passes it, with no warm-up (%d ms delay, %d flows"
            + " open): the warm-up penalty that is the ext_proc's own. Flows/s of each second of the window as a"
            + " share of the setup's best run at that cell; TTFT p99 against the pooled rounds.%n%n| setup | flows/s restart"
            + " / best | TTFT p99 restart / rounds |", first.delay().toMillis(), first.concurrency()));
    StringBuilder rule = new StringBuilder("|---|---|---|");
    for (int s = 1; s <= seconds; s++) {
      md.append(" s").append(s).append(" |");
      rule.append("---|");
    }
    md.append(" problems |\n").append(rule).append("---|\n");
    for (Map.Entry<Setup, RunStats> e : r.restarts().entrySet()) {
      RunStats f = e.getValue();
      RunStats b = first.combined().get(e.getKey());
      md.append(String.format(Locale.ROOT, "| %s | %.0f / %.0f (%.2f) | %s / %s |", e.getKey().title(),
          f.flowsPerSecond(), b.flowsPerSecond(), f.flowsPerSecond() / b.flowsPerSecond(), time(f.ttftP99()),
          time(b.ttftP99())));
      for (long flows : f.timeline()) {
        md.append(String.format(Locale.ROOT, " %.2f |", flows / b.flowsPerSecond()));
      }
      md.append(' ').append(f.problems()).append(" |\n");
    }
    r.firstRunProblems().forEach((k, v) -> md.append("\n- ").append(k).append(": ").append(v));
    if (!r.firstRunProblems().isEmpty()) {
      md.append('\n');
    }
  }

  private static void ratios(StringBuilder md, Result r) {
    md.append("\n## (c) against (b)\n\n");
    md.append("flows/s: (c) / (b). TTFT and gap p99: what (c) adds over (a) divided by what (b) adds over (a),"
        + " ((c) − (a)) / ((b) − (a)); n/a where (b) adds less than 2 % of (a), none where (c) adds nothing."
        + " CPU per flow: (c) / (b).\n\n");
    md.append("| delay | flows open | flows/s (c)/(b) | TTFT p99 added (c)/(b) | gap p99 added (c)/(b)"
        + " | ext_proc CPU/flow (c)/(b) | Envoy CPU/flow (c)/(b) |\n|---|---|---|---|---|---|---|\n");
    for (Cell cell : r.cells()) {
      RunStats a = cell.combined().get(Setup.BARE);
      RunStats b = cell.combined().get(Setup.NULL);
      RunStats c = cell.combined().get(Setup.SERVICE);
      md.append(String.format(Locale.ROOT, "| %d ms | %d | %.2f | %s | %s | %.2f | %.2f |%n",
          cell.delay().toMillis(), cell.concurrency(), c.flowsPerSecond() / b.flowsPerSecond(),
          added(a.ttftP99(), b.ttftP99(), c.ttftP99()), added(a.gapP99(), b.gapP99(), c.gapP99()),
          c.extProcCpuPerFlow() / b.extProcCpuPerFlow(), c.envoyCpuPerFlow() / b.envoyCpuPerFlow()));
    }
  }

  /**
   * ((c) − (a)) / ((b) − (a)); "n/a" when (b)'s addition is within noise of nothing, "none" when (c) adds
   * nothing over (a).
   */
  static String added(long a, long b, long c) {
    if (b - a < Math.max(1, a / 50)) {
      return "n/a";
    }
    if (c <= a) {
      return "none";
    }
    return String.format(Locale.ROOT, "%.2f", (c - a) / (double) (b - a));
  }

  private static void memory(StringBuilder md, Result r) {
    Cell widest = null;
    for (Cell cell : r.cells()) {
      if (widest == null || cell.delay().compareTo(widest.delay()) > 0
          || (cell.delay().equals(widest.delay()) && cell.concurrency() > widest.concurrency())) {
        widest = cell;
      }
    }
    md.append(String.format(Locale.ROOT, "%n## ext_proc resident memory per open stream%n%n"
            + "RSS of the ext_proc process at the end of the %d ms, %d-flow window (every flow mid-stream) minus its"
            + " RSS idle (ready and healthy in Envoy, before any flow), divided by %d; lower of the runs. An upper"
            + " bound: the JVM's heap grows with the whole run's garbage, not only with open streams. The last"
            + " column counts from the RSS just before that run instead (the heap already grown).%n%n",
        widest.delay().toMillis(), widest.concurrency(), widest.concurrency()));
    md.append("| process | RSS idle | RSS before that run | RSS at the window's end | per open stream |"
        + " per open stream, from before that run |\n|---|---|---|---|---|---|\n");
    for (Setup setup : new Setup[] {Setup.NULL, Setup.SERVICE}) {
      RunStats s = widest.combined().get(setup);
      long idle = r.idleRss().get(setup);
      md.append(String.format(Locale.ROOT, "| %s | %s | %s | %s | %s | %s |%n", setup.title(), mib(idle),
          mib(s.rssBefore()), mib(s.rssAtEnd()), kib((s.rssAtEnd() - idle) / (double) widest.concurrency()),
          kib((s.rssAtEnd() - s.rssBefore()) / (double) widest.concurrency())));
    }
  }

  /**
   * The soak's samples, and what a plateau looks like in them: the growth of the resident memory over the
   * second half against the first.
   */
  private static void soak(StringBuilder md, Result r) {
    var samples = r.soak();
    if (samples.isEmpty()) {
      return;
    }
    md.append(String.format(Locale.ROOT, "%n## Soak: the service alone, %d flows open, no delay%n%n"
            + "Resident memory of the service at the end of each %d s window, with the flows completed so far (every"
            + " generation response checked).%n%n| after | flows | flows/s | RSS | problems |%n|---|---|---|---|---|%n",
        EnvoyBench.SOAK_FLOWS, EnvoyBench.SOAK_WINDOW.toSeconds()));
    long problems = 0;
    for (EnvoyBench.SoakSample s : samples) {
      problems += s.problems();
      md.append(String.format(Locale.ROOT, "| %d s | %d | %.0f | %s | %d |%n", s.seconds(), s.flows(),
          s.flowsPerSecond(), mib(s.rss()), s.problems()));
    }
    long first = samples.get(0).rss();
    long middle = samples.get((samples.size() - 1) / 2).rss();
    long last = samples.get(samples.size() - 1).rss();
    long peak = samples.stream().mapToLong(EnvoyBench.SoakSample::rss).max().orElse(0);
    md.append(String.format(Locale.ROOT, "%nRSS after the first window %s, at the middle %s, at the end %s (peak %s):"
            + " %+.1f MiB over the first half, %+.1f MiB over the second; %d flows, %d problems.%n",
        mib(first), mib(middle), mib(last), mib(peak), (middle - first) / 1048576.0, (last - middle) / 1048576.0,
        samples.get(samples.size() - 1).flows(), problems));
  }

  private static void correctness(StringBuilder md, Result r) {
    md.append("\n## Correctness: every generation response of the measured rounds checked\n\n"
        + "| setup | checked | as expected | problems |\n|---|---|---|---|\n");
    for (Setup setup : Setup.values()) {
      long checked = 0;
      long expected = 0;
      long problems = 0;
      for (Cell cell : r.cells()) {
        RunStats s = cell.combined().get(setup);
        checked += s.checked();
        expected += s.asExpected();
        problems += s.problems();
      }
      md.append(String.format(Locale.ROOT, "| %s | %d | %d %s | %d |%n", setup.title(), checked, expected,
          setup == Setup.SERVICE ? "corrected" : "untouched", problems));
    }
    if (!r.problems().isEmpty()) {
      md.append("\nProblems (process logs in ").append(r.logs()).append("):\n\n");
      r.problems().forEach((k, v) -> md.append("- ").append(k).append(": ").append(v).append('\n'));
    }
  }

  /** A duration in the unit that keeps two or three digits; "-" for none (no sample). */
  static String time(double nanos) {
    if (nanos <= 0) {
      return "-";
    }
    if (nanos < 1e6) {
      return String.format(Locale.ROOT, "%.0f us", nanos / 1e3);
    }
    if (nanos < 1e7) {
      return String.format(Locale.ROOT, "%.2f ms", nanos / 1e6);
    }
    return String.format(Locale.ROOT, nanos < 1e8 ? "%.1f ms" : "%.0f ms", nanos / 1e6);
  }

  private static String seconds(Duration d) {
    return String.format(Locale.ROOT, "%.1f", d.toMillis() / 1000.0);
  }

  private static String mib(long bytes) {
    return String.format(Locale.ROOT, "%.0f MiB", bytes / (1024.0 * 1024));
  }

  private static String kib(double bytes) {
    return String.format(Locale.ROOT, "%.0f KiB", bytes / 1024);
  }
}
