package io.disaggusage.bench;

import io.disaggusage.bench.e2e.EndToEnd;
import io.disaggusage.bench.envoy.EnvoyBench;
import io.disaggusage.bench.jmh.FingerprintBench;
import io.disaggusage.bench.jmh.GrowthBench;
import io.disaggusage.bench.jmh.JsonBench;
import io.disaggusage.bench.jmh.SseBench;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.profile.GCProfiler;
import org.openjdk.jmh.results.Result;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.options.ChainedOptionsBuilder;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;
import org.openjdk.jmh.annotations.Mode;

/**
 * Runs every benchmark of docs/performance.md and prints one table of results, ratios and targets.
 * Progress goes to stderr, the table to stdout.
 *
 * <pre>
 *   java -jar bench/target/disagg-usage-bench.jar            # everything, under 10 minutes on 2 cores
 *   java -jar bench/target/disagg-usage-bench.jar --quick    # a few seconds: does every part run
 *   java -jar bench/target/disagg-usage-bench.jar envoy      # through a real Envoy (EnvoyBench), its own table
 * </pre>
 * Options: {@code --quick}, {@code --skip-e2e}, {@code --skip-jmh}, {@code --skip-memory},
 * {@code --streams K} (memory probe, default 10000). After {@code envoy}, {@link EnvoyBench}'s options.
 */
public final class BenchMain {
  private static final PrintStream err = System.err;

  /** How long and how big each part runs. */
  record Plan(
      boolean quick, boolean e2e, boolean jmh, boolean memory, int[] levels, Duration warmup, Duration measure,
      int rounds, int memoryStreams) {}

  private BenchMain() {}

  public static void main(String[] args) throws Exception {
    if (args.length > 0 && args[0].equals("envoy")) {
      EnvoyBench.main(java.util.Arrays.copyOfRange(args, 1, args.length));
      return;
    }
    Plan plan = plan(args);
    System.out.print(run(plan));
    System.out.flush();
    System.exit(0); // gRPC and JMH leave non-daemon threads behind
  }

  static Plan plan(String[] args) {
    boolean quick = false;
    boolean e2e = true;
    boolean jmh = true;
    boolean memory = true;
    int streams = 10_000;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--quick" -> quick = true;
        case "--skip-e2e" -> e2e = false;
        case "--skip-jmh" -> jmh = false;
        case "--skip-memory" -> memory = false;
        case "--streams" -> streams = Integer.parseInt(args[++i]);
        default -> throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    return quick
        ? new Plan(true, e2e, jmh, memory, new int[] {4}, Duration.ofMillis(300), Duration.ofMillis(300), 1, 200)
        : new Plan(false, e2e, jmh, memory, new int[] {1, 64, 256}, Duration.ofSeconds(2), Duration.ofSeconds(5), 2,
            streams);
  }

  /** Runs the plan; returns the table. */
  static String run(Plan plan) throws Exception {
    BenchHost.locateProjectRoot();
    long start = System.nanoTime();
    Table t = new Table();
    t.line("# disagg-usage-extproc benchmarks");
    t.line("");
    t.line("machine: " + BenchHost.machine() + ", "
        + System.getProperty("java.vm.name") + " " + System.getProperty("java.runtime.version")
        + (plan.quick() ? "; QUICK MODE: numbers are meaningless" : ""));
    List<Verdict> verdicts = new ArrayList<>();

    if (plan.e2e()) {
      err.println("[1/3] end to end over gRPC: 2 drivers x " + plan.levels().length + " levels x " + plan.rounds()
          + " rounds x 2 servers x (" + plan.warmup().toMillis() + " ms warm-up + " + plan.measure().toMillis() + " ms)");
      Map<EndToEnd.Driver, List<EndToEnd.Level>> runs = new java.util.EnumMap<>(EndToEnd.Driver.class);
      for (EndToEnd.Driver driver : EndToEnd.Driver.values()) {
        runs.put(driver, EndToEnd.run(
            driver, plan.levels(), plan.warmup(), plan.measure(), plan.rounds(), s -> err.println("  " + s)));
      }
      endToEnd(t, runs, verdicts);
    }
    Map<String, RunResult> jmh = Map.of();
    if (plan.jmh()) {
      err.println("[2/3] JMH");
      jmh = jmh(plan);
      microbenchmarks(t, jmh, verdicts);
    }
    if (plan.memory()) {
      err.println("[3/3] memory: " + plan.memoryStreams() + " streams open mid-body");
      MemoryProbe.Result m = plan.quick() ? MemoryProbe.measure(plan.memoryStreams()) : memoryInOwnJvm(plan.memoryStreams());
      memory(t, m, verdicts);
    }
    if (plan.jmh()) {
      growth(t, jmh, verdicts);
    }
    t.line("");
    t.line("## Targets (issue 7)");
    t.line("");
    t.line("| target | measured | met |");
    t.line("|---|---|---|");
    for (Verdict v : verdicts) {
      t.line("| " + v.target() + " | " + v.measured() + " | " + (v.met() ? "yes" : "**no**") + " |");
    }
    t.line("");
    t.line(String.format(Locale.ROOT, "total time: %.0f s", (System.nanoTime() - start) / 1e9));
    return t.toString();
  }

  record Verdict(String target, String measured, boolean met) {}

  // ---------------------------------------------------------------------------------------------

  private static void endToEnd(Table t, Map<EndToEnd.Driver, List<EndToEnd.Level>> runs, List<Verdict> verdicts) {
    t.line("");
    t.line("## 1. End to end over gRPC on loopback (Netty), context+generation pairs");
    t.line("");
    t.line("generation response: " + EndToEnd.CONTENT_EVENTS + " content events + usage event + [DONE] in 1-16 KiB chunks;"
        + " context response: one JSON chunk. chunks = response body messages answered; latency = from handing a"
        + " body message to gRPC until its reply arrives. lean = protocol-only driver (targets judged on it);"
        + " fake = the test suite's fake Envoy.");
    t.line("");
    t.line("| driver | streams | service chunks/s | null chunks/s | throughput ratio | service p50 / p99 | null p50 / p99"
        + " | p99 ratio | server CPU per chunk, service / null | driver share of CPU, service / null run"
        + " | pairs service / null | problems |");
    t.line("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (Map.Entry<EndToEnd.Driver, List<EndToEnd.Level>> run : runs.entrySet()) {
      boolean lean = run.getKey() == EndToEnd.Driver.LEAN;
      for (EndToEnd.Level l : run.getValue()) {
        EndToEnd.Side s = l.service();
        EndToEnd.Side f = l.floor();
        double tput = s.chunksPerSecond() / f.chunksPerSecond();
        double p99 = s.p99Nanos() / (double) f.p99Nanos();
        t.line(String.format(Locale.ROOT,
            "| %s | %d | %.0f | %.0f | %.2f | %s / %s | %s / %s | %.2f | %.1f / %.1f us (%.2fx) | %.0f%% / %.0f%% | %d / %d | %d |",
            lean ? "lean" : "fake", l.streams(), s.chunksPerSecond(), f.chunksPerSecond(), tput, us(s.p50Nanos()),
            us(s.p99Nanos()), us(f.p50Nanos()), us(f.p99Nanos()), p99, s.serverCpuNanosPerChunk() / 1000,
            f.serverCpuNanosPerChunk() / 1000, s.serverCpuNanosPerChunk() / f.serverCpuNanosPerChunk(),
            100 * s.driverCpuShare(), 100 * f.driverCpuShare(), s.pairs(), f.pairs(), s.problems() + f.problems()));
        if (lean && l.streams() >= 64) {
          verdicts.add(new Verdict("e2e throughput >= 0.8x null at " + l.streams() + " streams",
              String.format(Locale.ROOT, "%.2fx", tput), tput >= 0.8));
          verdicts.add(new Verdict("e2e p99 per-chunk latency <= 1.3x null at " + l.streams() + " streams",
              String.format(Locale.ROOT, "%.2fx", p99), p99 <= 1.3));
        }
      }
    }
  }

  private static String us(long nanos) {
    return nanos >= 10_000_000 ? String.format(Locale.ROOT, "%.0f ms", nanos / 1e6)
        : String.format(Locale.ROOT, "%.0f us", nanos / 1e3);
  }

  private static Map<String, RunResult> jmh(Plan plan) throws Exception {
    ChainedOptionsBuilder o = new OptionsBuilder()
        .include("^" + SseBench.class.getName().replace(".", "\\.") + "\\.")
        .include("^" + JsonBench.class.getName().replace(".", "\\.") + "\\.")
        .include("^" + GrowthBench.class.getName().replace(".", "\\.") + "\\.")
        .include("^" + FingerprintBench.class.getName().replace(".", "\\.") + "\\.")
        .mode(Mode.AverageTime)
        .timeUnit(TimeUnit.NANOSECONDS)
        .threads(1)
        .shouldFailOnError(true);
    File log = File.createTempFile("disagg-usage-jmh-", ".log");
    if (plan.quick()) {
      o.forks(0).warmupIterations(0).measurementIterations(1).measurementTime(TimeValue.milliseconds(50))
          .param("kib", "16").param("chunks", "10").param("size", "2048");
    } else {
      o.forks(1).warmupIterations(5).warmupTime(TimeValue.seconds(1)).measurementIterations(5)
          .measurementTime(TimeValue.seconds(1)).jvmArgsAppend("-Xms2g", "-Xmx2g").addProfiler(GCProfiler.class);
    }
    o.output(log.getPath());
    err.println("  JMH output: " + log.getPath());
    Collection<RunResult> results = new Runner(o.build()).run();
    Map<String, RunResult> byName = new HashMap<>();
    for (RunResult r : results) {
      String name = r.getParams().getBenchmark();
      name = name.substring(name.lastIndexOf('.', name.lastIndexOf('.') - 1) + 1);
      for (String p : r.getParams().getParamsKeys()) {
        name += ":" + r.getParams().getParam(p);
      }
      byName.put(name, r);
      err.println(String.format(Locale.ROOT, "  %-34s %14.0f ns/op (mean)", name, r.getPrimaryResult().getScore()));
    }
    return byName;
  }

  /**
   * The fastest measurement iteration in ns/op. These benchmarks are single-threaded and CPU-bound:
   * on a shared machine someone else's work can only make an iteration slower (by several times
   * while other builds run), never faster, so the least disturbed iteration is the best estimate.
   * JMH's own mean is in its log.
   */
  private static double ns(Map<String, RunResult> jmh, String name) {
    RunResult r = jmh.get(name);
    if (r == null) {
      throw new IllegalStateException("no JMH result for " + name + " in " + jmh.keySet());
    }
    double best = Double.MAX_VALUE;
    for (var b : r.getBenchmarkResults()) {
      for (var i : b.getIterationResults()) {
        best = Math.min(best, i.getPrimaryResult().getScore());
      }
    }
    return best == Double.MAX_VALUE ? r.getPrimaryResult().getScore() : best;
  }

  /** {@code gc.alloc.rate.norm} in bytes per operation; NaN without the GC profiler. */
  private static double alloc(Map<String, RunResult> jmh, String name) {
    for (Map.Entry<String, Result> e : jmh.get(name).getSecondaryResults().entrySet()) {
      if (e.getKey().endsWith("gc.alloc.rate.norm")) {
        return e.getValue().getScore();
      }
    }
    return Double.NaN;
  }

  private static String bytes(double b) {
    if (Double.isNaN(b)) {
      return "n/a";
    }
    if (b >= 1024 * 1024) {
      return String.format(Locale.ROOT, "%.2f MiB", b / (1024 * 1024));
    }
    if (b >= 1024) {
      return String.format(Locale.ROOT, "%.1f KiB", b / 1024);
    }
    return String.format(Locale.ROOT, "%.0f B", b);
  }

  private static void microbenchmarks(Table t, Map<String, RunResult> jmh, List<Verdict> verdicts) {
    t.line("");
    t.line("## 2. JMH, one thread (" + (jmh.values().iterator().next().getParams().getForks() == 0
        ? "in-process, one tiny iteration" : "1 fork, 5 x 1 s warm-up, 5 x 1 s measurement, -prof gc; time = fastest iteration") + ")");
    t.line("");
    t.line("| benchmark | time per op | throughput | allocated per op |");
    t.line("|---|---|---|---|");
    double pass = ns(jmh, "SseBench.passThrough");
    double passGbps = SseBench.PASS_THROUGH_BYTES / pass;
    t.line(String.format(Locale.ROOT, "| SSE pass-through (%d events, %s, 1-16 KiB chunks) | %.1f us | %.2f GB/s | %s |",
        SseBench.EVENTS, bytes(SseBench.PASS_THROUGH_BYTES), pass / 1e3, passGbps, bytes(alloc(jmh, "SseBench.passThrough"))));
    double cont = ns(jmh, "SseBench.continuousUsage");
    double contEps = SseBench.EVENTS * 1e9 / cont;
    t.line(String.format(Locale.ROOT, "| SSE continuous usage (%d events, usage in each) | %.1f us | %.0f events/s | %s |",
        SseBench.EVENTS, cont / 1e3, contEps, bytes(alloc(jmh, "SseBench.continuousUsage"))));
    double fin = ns(jmh, "SseBench.finalUsageEvent");
    t.line(String.format(Locale.ROOT, "| SSE final usage event (alone, new processor) | %.2f us | %.0f events/s | %s |",
        fin / 1e3, 1e9 / fin, bytes(alloc(jmh, "SseBench.finalUsageEvent"))));
    verdicts.add(new Verdict("pass-through SSE framing >= 1 GB/s on one core",
        String.format(Locale.ROOT, "%.2f GB/s", passGbps), passGbps >= 1.0));
    verdicts.add(new Verdict("continuous-usage rewriting >= 200 000 events/s on one core",
        String.format(Locale.ROOT, "%.0f events/s", contEps), contEps >= 200_000));
    for (String size : new String[] {"2048", "1048576"}) {
      if (!jmh.containsKey("JsonBench.rewrite:" + size)) {
        continue;
      }
      double rw = ns(jmh, "JsonBench.rewrite:" + size);
      double tree = ns(jmh, "JsonBench.jacksonTree:" + size);
      double tok = ns(jmh, "JsonBench.tokenize:" + size);
      int bodyBytes = io.disaggusage.bench.Bodies.chatCompletionWithLogprobs(Integer.parseInt(size), 3).length;
      String label = bytes(Integer.parseInt(size));
      t.line(String.format(Locale.ROOT, "| JSON %s rewrite (service, 16 KiB chunks) | %.1f us | %.0f MB/s | %s |",
          label, rw / 1e3, bodyBytes * 1e3 / rw, bytes(alloc(jmh, "JsonBench.rewrite:" + size))));
      t.line(String.format(Locale.ROOT, "| JSON %s Jackson tree round trip | %.1f us (%.2fx the rewrite) | %.0f MB/s | %s |",
          label, tree / 1e3, tree / rw, bodyBytes * 1e3 / tree, bytes(alloc(jmh, "JsonBench.jacksonTree:" + size))));
      t.line(String.format(Locale.ROOT, "| JSON %s tokenize only (parse floor) | %.1f us (rewrite is %.2fx this) | %.0f MB/s | %s |",
          label, tok / 1e3, rw / tok, bodyBytes * 1e3 / tok, bytes(alloc(jmh, "JsonBench.tokenize:" + size))));
      if (size.equals("1048576")) {
        verdicts.add(new Verdict("1 MiB JSON rewrite >= 3x faster than the Jackson tree round trip",
            String.format(Locale.ROOT, "%.2fx", tree / rw), tree / rw >= 3));
        double a = alloc(jmh, "JsonBench.rewrite:" + size);
        verdicts.add(new Verdict("1 MiB JSON rewrite allocates <= 64 KiB per operation", bytes(a),
            !Double.isNaN(a) && a <= 64 * 1024));
      }
    }
    fingerprint(t, jmh);
  }

  /** The request-body scan with and without the prompt fingerprint, same run, same bytes. */
  private static void fingerprint(Table t, Map<String, RunResult> jmh) {
    for (String shape : new String[] {"chat", "long"}) {
      for (String size : new String[] {"1024", "65536", "1048576"}) {
        String with = "FingerprintBench.scanWithFingerprint:" + shape + ":" + size;
        String without = "FingerprintBench.scanWithoutFingerprint:" + shape + ":" + size;
        if (!jmh.containsKey(with)) {
          continue;
        }
        double w = ns(jmh, with);
        double wo = ns(jmh, without);
        t.line(String.format(Locale.ROOT, "| request scan %s %s, with fingerprint / without | %.1f us / %.1f us (%.2fx) | %.0f MB/s | %s / %s |",
            bytes(Integer.parseInt(size)), shape.equals("chat") ? "chat" : "one long message", w / 1e3, wo / 1e3,
            w / wo, Integer.parseInt(size) * 1e3 / w, bytes(alloc(jmh, with)), bytes(alloc(jmh, without))));
      }
    }
  }

  private static void memory(Table t, MemoryProbe.Result m, List<Verdict> verdicts) {
    t.line("");
    t.line("## 3. Memory: " + m.streams() + " generation streams open mid-SSE-body through ExtProcService.process()");
    t.line("");
    t.line("| retained heap per in-flight stream | per stored context usage | left per stream after they were reset and dropped |");
    t.line("|---|---|---|");
    t.line("| " + bytes(m.bytesPerStream()) + " | " + bytes(m.bytesPerStoreEntry()) + " | "
        + bytes(m.bytesPerClosedStream()) + " |");
    verdicts.add(new Verdict("<= 8 KiB retained heap per idle in-flight stream", bytes(m.bytesPerStream()),
        m.bytesPerStream() <= 8 * 1024));
  }

  private static void growth(Table t, Map<String, RunResult> jmh, List<Verdict> verdicts) {
    t.line("");
    t.line("## 4. Growth");
    t.line("");
    t.line("| input | time per op | per byte / per chunk | allocated per op |");
    t.line("|---|---|---|---|");
    List<Double> perByte = new ArrayList<>();
    for (String kib : new String[] {"16", "256", "4096", "16384"}) {
      String name = "GrowthBench.json:" + kib;
      if (!jmh.containsKey(name)) {
        continue;
      }
      double op = ns(jmh, name);
      int bytes = io.disaggusage.bench.Bodies.chatCompletionWithLogprobs(Integer.parseInt(kib) * 1024, 5).length;
      perByte.add(op / bytes);
      t.line(String.format(Locale.ROOT, "| JSON %s | %.1f us | %.2f ns/byte | %s |",
          bytes(Integer.parseInt(kib) * 1024.0), op / 1e3, op / bytes, bytes(alloc(jmh, name))));
    }
    List<Double> perChunk = new ArrayList<>();
    for (String chunks : new String[] {"10", "1000", "100000"}) {
      String name = "GrowthBench.sse:" + chunks;
      if (!jmh.containsKey(name)) {
        continue;
      }
      double op = ns(jmh, name);
      perChunk.add(op / Integer.parseInt(chunks));
      t.line(String.format(Locale.ROOT, "| SSE %s chunks (one event each) | %.1f us | %.0f ns/chunk | %s |",
          chunks, op / 1e3, op / Integer.parseInt(chunks), bytes(alloc(jmh, name))));
    }
    if (perByte.size() > 1) {
      double r = perByte.get(perByte.size() - 1) / perByte.get(0);
      t.line("");
      t.line(String.format(Locale.ROOT, "JSON per-byte cost, 16 MiB / 16 KiB: %.2fx", r));
      verdicts.add(new Verdict("JSON per-byte cost at 16 MiB within 1.5x of 16 KiB",
          String.format(Locale.ROOT, "%.2fx", r), r <= 1.5));
    }
    if (perChunk.size() > 1) {
      double r = perChunk.get(perChunk.size() - 1) / perChunk.get(0);
      t.line(String.format(Locale.ROOT, "SSE per-chunk cost, 100 000 chunks / 10 chunks: %.2fx", r));
    }
  }

  // ---------------------------------------------------------------------------------------------

  private static MemoryProbe.Result memoryInOwnJvm(int streams) throws IOException, InterruptedException {
    String java = ProcessHandle.current().info().command().orElse("java");
    Process p = new ProcessBuilder(java, "-Xms2g", "-Xmx2g", "-cp", System.getProperty("java.class.path"),
        MemoryProbe.class.getName(), Integer.toString(streams))
        .redirectError(ProcessBuilder.Redirect.INHERIT)
        .start();
    String result = null;
    try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
      String line;
      while ((line = r.readLine()) != null) {
        if (line.startsWith("MEMORY ")) {
          result = line;
        }
      }
    }
    if (p.waitFor() != 0 || result == null) {
      throw new IllegalStateException("memory probe failed (exit " + p.exitValue() + ")");
    }
    String[] f = result.split(" ");
    return new MemoryProbe.Result(Integer.parseInt(f[1]), Double.parseDouble(f[2]), Double.parseDouble(f[3]),
        Double.parseDouble(f[4]));
  }

  /** Accumulates the printed table. */
  private static final class Table {
    private final StringBuilder sb = new StringBuilder();

    void line(String s) {
      sb.append(s).append('\n');
    }

    @Override
    public String toString() {
      return sb.toString();
    }
  }
}
