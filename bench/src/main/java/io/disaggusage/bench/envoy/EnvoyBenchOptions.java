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
 *   --real-engine on     then the row with the real vLLM pair ({@link RealEngineRow}; --quick: off)
 *   --real-engine-requests 200   measured P/D requests per setup, as is and again with CPU keepers
 *   --real-engine-warmup 1000    warm-up turns (one request per setup each) before the first measurement
 *   --only-real-engine   only that row: none of the runs above
 * </pre>
 */
record EnvoyBenchOptions(
    boolean quick, List<Duration> delays, int[] concurrency, Duration duration, Duration warmup, int events, int rounds,
    Duration soak, boolean realEngine, boolean onlyRealEngine, int realEngineRequests, int realEngineWarmup) {

  /** The options; {@code --quick} first sets the tiny run, the others then override either. */
  static EnvoyBenchOptions parse(String... args) {
    boolean quick = Arrays.asList(args).contains("--quick");
    List<Duration> delays = List.of(Duration.ZERO, Duration.ofMillis(20));
    int[] concurrency = quick ? new int[] {8} : new int[] {16, 64, 256};
    Duration duration = quick ? Duration.ofSeconds(1) : Duration.ofSeconds(10);
    Duration warmup = quick ? Duration.ofMillis(500) : Duration.ofSeconds(2);
    int events = quick ? 50 : 300;
    int rounds = quick ? 1 : 2;
    Duration soak = Duration.ZERO;
    boolean realEngine = !quick;
    boolean onlyRealEngine = false;
    int realEngineRequests = 200;
    int realEngineWarmup = 1000;
    for (int i = 0; i < args.length; i++) {
      String value = i + 1 < args.length ? args[i + 1] : null;
      switch (args[i]) {
        case "--quick" -> {
          continue;
        }
        case "--only-real-engine" -> {
          onlyRealEngine = true;
          continue;
        }
        case "--delays" -> delays = Arrays.stream(need(args[i], value).split(","))
            .map(s -> Duration.ofMillis(Long.parseLong(s.trim()))).toList();
        case "--concurrency" -> concurrency = Arrays.stream(need(args[i], value).split(","))
            .mapToInt(s -> Integer.parseInt(s.trim())).toArray();
        case "--duration" -> duration = duration(need(args[i], value));
        case "--warmup" -> warmup = duration(need(args[i], value));
        case "--events" -> events = Integer.parseInt(need(args[i], value));
        case "--rounds" -> rounds = Integer.parseInt(need(args[i], value));
        case "--soak" -> soak = duration(need(args[i], value));
        case "--real-engine" -> realEngine = onOff(args[i], need(args[i], value));
        case "--real-engine-requests" -> realEngineRequests = Integer.parseInt(need(args[i], value));
        case "--real-engine-warmup" -> realEngineWarmup = Integer.parseInt(need(args[i], value));
        default -> throw new IllegalArgumentException("unknown option " + args[i]
            + " (options: --quick, --delays MS,MS, --concurrency N,N, --duration 10s, --warmup 2s, --events N, --rounds N,"
            + " --soak 600s, --real-engine on|off, --real-engine-requests N, --real-engine-warmup N, --only-real-engine)");
      }
      i++;
    }
    if (delays.isEmpty() || concurrency.length == 0 || events < 1 || rounds < 1) {
      throw new IllegalArgumentException("need at least one delay, one concurrency, one event and one round");
    }
    if (onlyRealEngine && Arrays.asList(args).contains("--real-engine") && !realEngine) {
      throw new IllegalArgumentException("--only-real-engine runs the real-engine row: not with --real-engine off");
    }
    if (realEngineRequests < 1 || realEngineWarmup < 0) {
      throw new IllegalArgumentException("--real-engine-requests needs at least 1, --real-engine-warmup at least 0");
    }
    return new EnvoyBenchOptions(quick, delays, concurrency, duration, warmup, events, rounds, soak,
        realEngine || onlyRealEngine, onlyRealEngine, realEngineRequests, realEngineWarmup);
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

  private static boolean onOff(String option, String value) {
    return switch (value) {
      case "on" -> true;
      case "off" -> false;
      default -> throw new IllegalArgumentException(option + " takes on or off, not " + value);
    };
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
