package io.disaggusage.bench.envoy;

import io.disaggusage.bench.BenchHost;
import io.disaggusage.extproc.testkit.InstalledTools;
import io.disaggusage.extproc.testkit.RealVllm;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * The service measured as a user feels it (issue 18): closed-loop vLLM P/D flows from a Netty client
 * through a real Envoy on the shipped bootstrap, to Netty workers, with (a) no ext_proc filter, (b) a
 * null processor and (c) the shipped jar, taking turns in one run. Prints a Markdown table to stdout,
 * progress to stderr.
 *
 * <pre>
 *   java -jar bench/target/disagg-usage-bench.jar envoy            # the full run, about 20 minutes on 2 cores
 *   java -jar bench/target/disagg-usage-bench.jar envoy --quick    # under a minute: does everything work
 *   java -jar bench/target/disagg-usage-bench.jar envoy --only-real-engine   # only the real vLLM row
 * </pre>
 * At the end (unless {@code --real-engine off} or {@code --quick}) the row with the real vLLM pair,
 * {@link RealEngineRow}. Options: {@link EnvoyBenchOptions}. Exit status 0, 1 when a flow had a problem
 * (listed on stderr and in the table) or the real-engine row failed to correct a request, 2 when Envoy,
 * vLLM or the jar is missing or an option is wrong.
 */
public final class EnvoyBench {
  /**
   * One delay and concurrency: each setup's runs combined ({@link RunStats#combine}: the best flows/s and CPU,
   * the latencies pooled).
   */
  record Cell(Duration delay, int concurrency, Map<Setup, RunStats> combined) {}

  /** Flows open during the soak: the concurrency of the soaks the issue reported. */
  static final int SOAK_FLOWS = 64;
  /** One soak window; the ext_proc's resident memory is read at each window's end. */
  static final Duration SOAK_WINDOW = Duration.ofSeconds(20);

  /** The soak after {@code seconds}: flows completed so far, the window's rate and the RSS at its end. */
  record SoakSample(long seconds, long flows, double flowsPerSecond, long rss, long problems) {}

  /**
   * Everything the table shows. {@code firstRuns}: each setup's first run after start, at the first cell;
   * {@code restarts}: each ext_proc's first run after a restart of it alone, at the same cell, without a
   * warm-up; both kept apart from the measured rounds with their own {@code firstRunProblems}.
   */
  record Result(
      EnvoyBenchOptions options, Map<Setup, RunStats> firstRuns, Map<Setup, RunStats> restarts,
      Map<String, Long> firstRunProblems, List<Cell> cells,
      Map<Setup, Long> idleRss, List<SoakSample> soak, Map<String, Long> problems, Duration elapsed, Path logs) {
    long problemCount() {
      return problems.values().stream().mapToLong(Long::longValue).sum();
    }
  }

  private EnvoyBench() {}

  public static void main(String[] args) throws Exception {
    EnvoyBenchOptions options;
    try {
      options = EnvoyBenchOptions.parse(args);
    } catch (IllegalArgumentException e) {
      System.err.println(e.getMessage());
      System.exit(2);
      return;
    }
    try {
      BenchHost.locateProjectRoot();
      if (options.realEngine()) {
        // before a 12-minute run, not after it: the real vLLM engine and its model are installed
        RealVllm.requireInstalled();
      }
      int status = 0;
      if (!options.onlyRealEngine()) {
        Result result = run(options, System.err::println);
        System.out.print(EnvoyBenchReport.render(result));
        System.out.flush();
        status = result.problemCount() == 0 ? 0 : 1;
      }
      if (options.realEngine()) {
        RealEngineRow.Result row = RealEngineRow.run(options, options.onlyRealEngine() ? logs() : logsFolder(), System.err::println);
        System.out.print(row.table());
        System.out.flush();
        if (row.problems() > 0) {
          System.err.println("real-engine row: " + row.problems() + " measured requests through the service were not corrected");
          status = 1;
        }
      }
      System.exit(status);
    } catch (AssertionError missing) {
      // InstalledTools: no Envoy or vLLM (run scripts/install-test-tools) or no jar (build it)
      System.err.println(missing.getMessage());
      System.exit(2);
    } catch (RuntimeException failed) {
      // a child that did not start, a request that failed: stop here, with the cause, whatever threads are left
      failed.printStackTrace();
      System.exit(1);
    }
  }

  /** Starts everything, runs every cell, stops everything. */
  static Result run(EnvoyBenchOptions o, Consumer<String> log) throws Exception {
    BenchHost.locateProjectRoot();
    long begin = System.nanoTime();
    Path logs = logs();
    log.accept(String.format(Locale.ROOT, "through real Envoy: %d delays x %d concurrencies x %d rounds x %d setups,"
            + " about %d s plus start-up; process logs in %s", o.delays().size(), o.concurrency().length, o.rounds(),
        Setup.values().length, o.estimate().toSeconds(), logs));
    FlowBodies bodies = new FlowBodies(o.events());
    // one client thread: the client reads a few chunks per flow, far less than Envoy does
    EventLoopGroup clientLoops =
        new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("bench-client", true), NioIoHandler.newFactory());
    Map<String, Long> problems = new TreeMap<>();
    Map<String, Long> firstRunProblems = new TreeMap<>();
    Map<Setup, RunStats> firstRuns = new EnumMap<>(Setup.class);
    List<Cell> cells = new ArrayList<>();
    try (BenchStack stack = BenchStack.start(bodies, o.serviceJvmOptions(), logs, log)) {
      FlowLoad load = new FlowLoad(stack, clientLoops, bodies);
      // Every process is fresh here (the JIT has compiled little, the null processor has no warm-up of its
      // own): one run each, shown apart, so the measured rounds compare warmed-up setups.
      log.accept("first run of each setup after start (shown apart from the measured rounds)");
      for (Setup setup : Setup.values()) {
        RunStats run = load.run(setup, o.concurrency()[0], o.delays().get(0), o.warmup(), o.duration(),
            found -> collect(found, "first run, " + setup.title(), firstRunProblems, log));
        log.accept(progress(o.delays().get(0), o.concurrency()[0], -1, setup, run));
        firstRuns.put(setup, run);
      }
      for (Duration delay : o.delays()) {
        for (int concurrency : o.concurrency()) {
          Map<Setup, RunStats> combined = new EnumMap<>(Setup.class);
          for (int round = 0; round < o.rounds(); round++) {
            List<Setup> order = new ArrayList<>(List.of(Setup.values()));
            if (round % 2 == 1) {
              Collections.reverse(order);
            }
            for (Setup setup : order) {
              RunStats run = load.run(setup, concurrency, delay, o.warmup(), o.duration(), o.minSamples(),
                  o.maxWindow(), found -> collect(found, setup.title(), problems, log));
              log.accept(progress(delay, concurrency, round, setup, run));
              combined.merge(setup, run, RunStats::combine);
            }
          }
          cells.add(new Cell(delay, concurrency, combined));
        }
      }
      Map<Setup, RunStats> restarts = restarts(o, stack, load, firstRunProblems, log);
      List<SoakSample> soak = soak(o, load, problems, log);
      return new Result(o, firstRuns, restarts, firstRunProblems, cells, Map.of(Setup.NULL, stack.idleRss(Setup.NULL), Setup.SERVICE, stack.idleRss(Setup.SERVICE)),
          soak, problems, Duration.ofNanos(System.nanoTime() - begin), logs);
    } finally {
      clientLoops.shutdownGracefully(0, 1, TimeUnit.SECONDS);
    }
  }

  /**
   * The warm-up penalty of the ext_proc alone: each ext_proc process restarted while Envoy, the workers and
   * the client stay warm, then measured from the moment Envoy's health check passes it, without a warm-up,
   * second by second. The first runs after start cannot tell this: there every process is cold.
   */
  private static Map<Setup, RunStats> restarts(EnvoyBenchOptions o, BenchStack stack, FlowLoad load,
      Map<String, Long> problems, Consumer<String> log) throws InterruptedException {
    Map<Setup, RunStats> restarts = new EnumMap<>(Setup.class);
    log.accept("each ext_proc restarted alone, then measured at once (shown apart from the measured rounds)");
    for (Setup setup : List.of(Setup.NULL, Setup.SERVICE)) {
      stack.restart(setup);
      RunStats run = load.run(setup, o.concurrency()[0], o.delays().get(0), Duration.ZERO, o.duration(),
          found -> collect(found, "restart, " + setup.title(), problems, log));
      log.accept(progress(o.delays().get(0), o.concurrency()[0], -2, setup, run));
      restarts.put(setup, run);
    }
    return restarts;
  }

  /**
   * The service alone, {@value #SOAK_FLOWS} flows without a delay, window after window until {@code --soak} has
   * passed: does its resident memory level off? Every response is checked as in the measured rounds.
   */
  private static List<SoakSample> soak(EnvoyBenchOptions o, FlowLoad load, Map<String, Long> problems,
      Consumer<String> log) throws InterruptedException {
    List<SoakSample> samples = new ArrayList<>();
    if (o.soak().isZero()) {
      return samples;
    }
    log.accept("soak: the service alone, " + SOAK_FLOWS + " flows, " + o.soak().toSeconds() + " s");
    long begin = System.nanoTime();
    long flows = 0;
    while (System.nanoTime() - begin < o.soak().toNanos()) {
      RunStats run = load.run(Setup.SERVICE, SOAK_FLOWS, Duration.ZERO, Duration.ZERO, SOAK_WINDOW,
          found -> collect(found, Setup.SERVICE.title(), problems, log));
      flows += run.checked();
      SoakSample sample = new SoakSample(TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - begin), flows,
          run.flowsPerSecond(), run.rssAtEnd(), run.problems());
      samples.add(sample);
      log.accept(String.format(Locale.ROOT, "  soak %4d s: %d flows, %.0f flows/s, RSS %d MiB, problems %d",
          sample.seconds(), sample.flows(), sample.flowsPerSecond(), sample.rss() >> 20, sample.problems()));
    }
    return samples;
  }

  /**
   * The children's logs and Envoy's bootstraps: {@code bench/target/envoy-bench-logs}, emptied first, so the
   * last run's stay for a post-mortem and nothing piles up.
   */
  static Path logs() throws java.io.IOException {
    Path dir = logsFolder();
    if (Files.isDirectory(dir)) {
      try (var old = Files.walk(dir)) {
        for (Path f : old.sorted(java.util.Comparator.reverseOrder()).toList()) {
          if (!f.equals(dir)) {
            Files.delete(f);
          }
        }
      }
    }
    return Files.createDirectories(dir);
  }

  private static Path logsFolder() {
    return InstalledTools.root().resolve("bench/target/envoy-bench-logs");
  }

  private static void collect(Map<String, Long> found, String run, Map<String, Long> into, Consumer<String> log) {
    found.forEach((k, v) -> into.merge(run + ": " + k, v, Long::sum));
    if (!found.isEmpty()) {
      log.accept("    problems: " + found);
    }
  }

  /** A run's line on stderr; round -1 is the first run after start, -2 the run after a restart. */
  private static String progress(Duration delay, int concurrency, int round, Setup setup, RunStats r) {
    return String.format(Locale.ROOT, "  %2d ms, %3d flows, %-7s %-25s %4.1f s, %7.1f flows/s, TTFT p99 %s (n %d),"
            + " gap p99 %s, CPU/flow Envoy %s ext_proc %s, checked %d, problems %d",
        delay.toMillis(), concurrency, round == -1 ? "first," : round == -2 ? "restart," : "round " + (round + 1) + ",",
        setup.title() + ":", r.windowSeconds(), r.flowsPerSecond(), EnvoyBenchReport.time(r.ttftP99()), r.ttftSamples(),
        EnvoyBenchReport.time(r.gapP99()), EnvoyBenchReport.time(r.envoyCpuPerFlow()),
        setup.extProc() ? EnvoyBenchReport.time(r.extProcCpuPerFlow()) : "-", r.checked(), r.problems());
  }
}
