package io.disaggusage.bench.envoy;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * How long and how wide the run through real Envoy is.
 *
 * <pre>
 *   --quick              a tiny run that checks everything works (concurrency 8, 50 events, 1 s windows, 1 round)
 *   --delays 0,20        inter-token delays in milliseconds
 *   --concurrency 16,64,256
 *   --duration 10s       measurement window per run (s or ms suffix; a bare number is seconds)
 *   --warmup 2s          before each window; with a delay, one whole flow more
 *   --events 300         content events per generation response
 *   --rounds 2           runs per setup and cell, the order of the setups reversed every other round
 *   --soak 600s          then the service alone at 64 flows for this long, its resident memory sampled (0: none)
 * </pre>
 */
record EnvoyBenchOptions(
    boolean quick, List<Duration> delays, int[] concurrency, Duration duration, Duration warmup, int events, int rounds,
    Duration soak) {

  static EnvoyBenchOptions defaults() {
    return new EnvoyBenchOptions(false, List.of(Duration.ZERO, Duration.ofMillis(20)), new int[] {16, 64, 256},
        Duration.ofSeconds(10), Duration.ofSeconds(2), 300, 2, Duration.ZERO);
  }

  static EnvoyBenchOptions quickRun() {
    return new EnvoyBenchOptions(true, List.of(Duration.ZERO, Duration.ofMillis(20)), new int[] {8},
        Duration.ofSeconds(1), Duration.ofMillis(500), 50, 1, Duration.ZERO);
  }

  /** The options; {@code --quick} first sets the tiny run, the others then override either. */
  static EnvoyBenchOptions parse(String... args) {
    EnvoyBenchOptions o = Arrays.asList(args).contains("--quick") ? quickRun() : defaults();
    for (int i = 0; i < args.length; i++) {
      String value = i + 1 < args.length ? args[i + 1] : null;
      switch (args[i]) {
        case "--quick" -> {
          continue;
        }
        case "--delays" -> o = new EnvoyBenchOptions(o.quick, Arrays.stream(need(args[i], value).split(","))
            .map(s -> Duration.ofMillis(Long.parseLong(s.trim()))).toList(), o.concurrency, o.duration, o.warmup, o.events, o.rounds, o.soak);
        case "--concurrency" -> o = new EnvoyBenchOptions(o.quick, o.delays, Arrays.stream(need(args[i], value).split(","))
            .mapToInt(s -> Integer.parseInt(s.trim())).toArray(), o.duration, o.warmup, o.events, o.rounds, o.soak);
        case "--duration" -> o = new EnvoyBenchOptions(o.quick, o.delays, o.concurrency, duration(need(args[i], value)), o.warmup, o.events, o.rounds, o.soak);
        case "--warmup" -> o = new EnvoyBenchOptions(o.quick, o.delays, o.concurrency, o.duration, duration(need(args[i], value)), o.events, o.rounds, o.soak);
        case "--events" -> o = new EnvoyBenchOptions(o.quick, o.delays, o.concurrency, o.duration, o.warmup, Integer.parseInt(need(args[i], value)), o.rounds, o.soak);
        case "--rounds" -> o = new EnvoyBenchOptions(o.quick, o.delays, o.concurrency, o.duration, o.warmup, o.events, Integer.parseInt(need(args[i], value)), o.soak);
        case "--soak" -> o = new EnvoyBenchOptions(o.quick, o.delays, o.concurrency, o.duration, o.warmup, o.events, o.rounds, duration(need(args[i], value)));
        default -> throw new IllegalArgumentException("unknown option " + args[i]
            + " (options: --quick, --delays MS,MS, --concurrency N,N, --duration 10s, --warmup 2s, --events N, --rounds N, --soak 600s)");
      }
      i++;
    }
    if (o.delays.isEmpty() || o.concurrency.length == 0 || o.events < 1 || o.rounds < 1) {
      throw new IllegalArgumentException("need at least one delay, one concurrency, one event and one round");
    }
    return o;
  }

  /**
   * The run's length without process start-up: every window, warm-up and (with a delay) drain, the first
   * run of each setup and the run after each ext_proc's restart included.
   */
  Duration estimate() {
    Duration total = run(delays.get(0)).multipliedBy(Setup.values().length + 2L);
    for (Duration delay : delays) {
      total = total.plus(run(delay).multipliedBy((long) concurrency.length * rounds * Setup.values().length));
    }
    return total.plus(soak);
  }

  private Duration run(Duration delay) {
    Duration flow = delay.multipliedBy(events);
    return warmup.plus(flow).plus(duration).plus(flow);
  }

  private static String need(String option, String value) {
    if (value == null) {
      throw new IllegalArgumentException(option + " needs a value");
    }
    return value;
  }

  private static Duration duration(String text) {
    String t = text.trim().toLowerCase(Locale.ROOT);
    if (t.endsWith("ms")) {
      return Duration.ofMillis(Long.parseLong(t.substring(0, t.length() - 2)));
    }
    return Duration.ofMillis(Math.round(Double.parseDouble(t.endsWith("s") ? t.substring(0, t.length() - 1) : t) * 1000));
  }
}
