package io.disaggusage.bench.envoy;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * How long and how wide the run through real Envoy is.
 *
 * <pre>
 *   --quick              a tiny run that checks everything works (concurrency 8, 50 events, 1 s windows, 1 round,
 *                        10 TTFT samples in windows of at most 3 s, no real-engine row)
 *   --delays 0,20        inter-token delays in milliseconds
 *   --concurrency 16,64,256
 *   --duration 10s       measurement window per run (s or ms suffix; a bare number is seconds)
 *   --min-samples 200    a measured run's window goes on past --duration until it holds this many TTFT samples
 *   --max-window 90s     ... but lasts no longer than this
 *   --warmup 2s          before each window; with a delay, one whole flow more
 *   --events 300         content events per generation response
 *   --rounds 2           runs per setup and cell, the order of the setups reversed every other round
 *   --soak 600s          then the service alone at 64 flows for this long, its resident memory sampled (0: none)
 *   --real-engine on     then the row with the real vLLM pair ({@link RealEngineRow}; --quick: off)
 *   --real-engine-requests 600   measured P/D requests per setup, as is and again with CPU keepers
 *   --real-engine-warmup 1000    warm-up turns (one request per setup each) before the first measurement
 *   --only-real-engine   only that row: none of the runs above
 *   --service-jvm-options "-XX:…"  JVM options put before the README's for the service's JVM (all runs; none by
 *                        default), to weigh a JVM setting against the same floor, e.g. -XX:CompileThresholdScaling=0.1
 * </pre>
 */
record EnvoyBenchOptions(
    boolean quick, List<Duration> delays, int[] concurrency, Duration duration, int minSamples, Duration maxWindow,
    Duration warmup, int events, int rounds, Duration soak, boolean realEngine, boolean onlyRealEngine,
    int realEngineRequests, int realEngineWarmup, List<String> serviceJvmOptions) {

  /** The options that take a value, as the usage message shows them. */
  private static final List<String> OPTIONS = List.of("--delays", "--concurrency", "--duration", "--min-samples",
      "--max-window", "--warmup", "--events", "--rounds", "--soak", "--real-engine", "--real-engine-requests",
      "--real-engine-warmup", "--service-jvm-options");

  /** The options; {@code --quick} first sets the tiny run, the others then override either. */
  static EnvoyBenchOptions parse(String... args) {
    boolean quick = Arrays.asList(args).contains("--quick");
    List<Duration> delays = List.of(Duration.ZERO, Duration.ofMillis(20));
    int[] concurrency = quick ? new int[] {8} : new int[] {16, 64, 256};
    Duration duration = quick ? Duration.ofSeconds(1) : Duration.ofSeconds(10);
    int minSamples = quick ? 10 : 200;
    Duration maxWindow = quick ? Duration.ofSeconds(3) : Duration.ofSeconds(90);
    Duration warmup = quick ? Duration.ofMillis(500) : Duration.ofSeconds(2);
    int events = quick ? 50 : 300;
    int rounds = quick ? 1 : 2;
    Duration soak = Duration.ZERO;
    boolean realEngine = !quick;
    boolean onlyRealEngine = false;
    int realEngineRequests = 600;
    int realEngineWarmup = 1000;
    List<String> serviceJvmOptions = List.of();
    for (int i = 0; i < args.length; i++) {
      if (args[i].equals("--quick")) {
        continue;
      }
      if (args[i].equals("--only-real-engine")) {
        onlyRealEngine = true;
        continue;
      }
      if (!OPTIONS.contains(args[i])) {
        throw new IllegalArgumentException("unknown option " + args[i]
            + " (options: --quick, --only-real-engine, " + String.join(", ", OPTIONS) + ")");
      }
      String value = need(args[i], i + 1 < args.length ? args[i + 1] : null);
      switch (args[i]) {
        case "--delays" -> delays = Arrays.stream(value.split(",")).map(s -> Duration.ofMillis(Long.parseLong(s.trim()))).toList();
        case "--concurrency" -> concurrency = Arrays.stream(value.split(",")).mapToInt(s -> Integer.parseInt(s.trim())).toArray();
        case "--duration" -> duration = duration(value);
        case "--min-samples" -> minSamples = Integer.parseInt(value);
        case "--max-window" -> maxWindow = duration(value);
        case "--warmup" -> warmup = duration(value);
        case "--events" -> events = Integer.parseInt(value);
        case "--rounds" -> rounds = Integer.parseInt(value);
        case "--soak" -> soak = duration(value);
        case "--real-engine" -> realEngine = onOff(args[i], value);
        case "--real-engine-requests" -> realEngineRequests = Integer.parseInt(value);
        case "--real-engine-warmup" -> realEngineWarmup = Integer.parseInt(value);
        case "--service-jvm-options" -> serviceJvmOptions = jvmOptions(value);
        default -> throw new IllegalStateException(args[i]); // OPTIONS and the cases name the same options
      }
      i++;
    }
    if (delays.isEmpty() || concurrency.length == 0 || events < 1 || rounds < 1 || minSamples < 0) {
      throw new IllegalArgumentException("need at least one delay, one concurrency, one event and one round,"
          + " and no negative --min-samples");
    }
    if (onlyRealEngine && Arrays.asList(args).contains("--real-engine") && !realEngine) {
      throw new IllegalArgumentException("--only-real-engine runs the real-engine row: not with --real-engine off");
    }
    if (realEngineRequests < 1 || realEngineWarmup < 0) {
      throw new IllegalArgumentException("--real-engine-requests needs at least 1, --real-engine-warmup at least 0");
    }
    return new EnvoyBenchOptions(quick, delays, concurrency, duration, minSamples, maxWindow, warmup, events, rounds,
        soak, realEngine || onlyRealEngine, onlyRealEngine, realEngineRequests, realEngineWarmup, serviceJvmOptions);
  }

  /** The options split on white space; each must start with {@code -} (a JVM option, not an argument of the jar). */
  private static List<String> jvmOptions(String value) {
    List<String> options = value.isBlank() ? List.of() : List.of(value.trim().split("\\s+"));
    for (String option : options) {
      if (!option.startsWith("-")) {
        throw new IllegalArgumentException("--service-jvm-options takes JVM options (each starting with -), not " + option);
      }
    }
    return options;
  }

  /**
   * The run's length without process start-up: every window, warm-up and (with a delay) drain, the first
   * run of each setup and the run after each ext_proc's restart included, and reading Envoy's access log
   * after each (about one flush interval). A measured window is counted
   * as long as {@code --min-samples} needs at the rate the flows can give: with a delay a flow lasts about
   * delay × events, so {@code concurrency} lanes start concurrency / (delay × events) flows a second;
   * without one the flows are short and {@code --duration} is taken to suffice.
   */
  Duration estimate() {
    Duration total = run(delays.get(0), duration).multipliedBy(Setup.values().length + 2L);
    for (Duration delay : delays) {
      for (int flows : concurrency) {
        total = total.plus(run(delay, window(delay, flows)).multipliedBy((long) rounds * Setup.values().length));
      }
    }
    return total.plus(soak);
  }

  /** The window a measured run at {@code delay} and {@code flows} is expected to need. */
  Duration window(Duration delay, int flows) {
    Duration needed = delay.multipliedBy(events).multipliedBy(minSamples).dividedBy(flows);
    Duration longest = maxWindow.compareTo(duration) > 0 ? maxWindow : duration;
    return needed.compareTo(duration) <= 0 ? duration : needed.compareTo(longest) >= 0 ? longest : needed;
  }

  private Duration run(Duration delay, Duration window) {
    Duration flow = delay.multipliedBy(events);
    return warmup.plus(flow).plus(window).plus(flow).plus(AccessLogTail.FLUSH_INTERVAL);
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
