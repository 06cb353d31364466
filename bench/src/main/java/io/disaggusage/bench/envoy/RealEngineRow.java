package io.disaggusage.bench.envoy;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.testkit.AccessLogLine;
import io.disaggusage.extproc.testkit.ChildProcess;
import io.disaggusage.extproc.testkit.FreePorts;
import io.disaggusage.extproc.testkit.InstalledTools;
import io.disaggusage.extproc.testkit.RealVllm;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import io.disaggusage.extproc.testkit.ShippedBootstrap.Topology;
import io.disaggusage.extproc.testkit.ToyProxy;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.ToLongFunction;

/**
 * The row with the real vLLM pair (issue 35): what the service adds to one P/D request in front of the real
 * vLLM 0.32 engine ({@link RealVllm}: CPU, NIXL over UCX on loopback, the tiny model). vLLM's toy proxy
 * ({@link ToyProxy}) sends each chat request to the prefill and then the decode server through one of three
 * Envoys on the shipped bootstrap, all straight to the same two servers: (a) without the ext_proc filter,
 * (b) with it and the null processor, (c) with it and the shipped jar. The setups take turns request by
 * request (a b c, b c a, c a b, …), one request at a time, each with a fresh prompt (no prefix hit, the same
 * mix for all), so drift on the machine falls on all alike.
 *
 * <p>After {@code --real-engine-warmup} turns (both JVMs need over a thousand before their JIT is at steady
 * state) it measures {@code --real-engine-requests} turns twice: as is, and with CPU keepers (one
 * {@code SCHED_IDLE} busy loop per CPU: on a VM whose idle vCPUs halt, every hop of a mostly idle,
 * one-request-at-a-time workload pays a vCPU's wake-up; the keepers take only CPU time nobody else wants).
 * Each measurement gives each setup's client-observed latency of the whole P/D request (median, p90, p99),
 * what (b) and (c) add at the median as the median of the paired differences (each request against the (a)
 * request of its turn; {@link PairedDifferences}: with a bootstrap interval, and over the pairs that took
 * the engines' same path), and how long Envoy itself recorded waiting for its ext_proc server in (b) and (c)
 * ({@code %FILTER_STATE(envoy.filters.http.ext_proc:FIELD:…)%} in the access log): summed over both legs,
 * and per leg and phase. Where each setup's time went, from Envoy's own spans of both legs: the engines
 * (upstream), inside Envoy less the upstream (its filters, the ext_proc waits among them), and outside Envoy
 * (the toy proxy, the client, the hops between), each with its paired median over (a). And how much the
 * ext_proc JVMs' JIT compiled and their collectors collected during the measured turns and each 250 warm-up
 * turns ({@link JvmActivity}): a compile runs beside the request on a two-core machine.
 */
final class RealEngineRow {
  private static final String PATH = "/v1/chat/completions";
  private static final int MAX_TOKENS = 8;
  /** Turns after the keepers start and before the second measurement: none of their start falls in it. */
  private static final int SETTLE_TURNS = 20;
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final List<String> LEGS = List.of("context", "generation");

  /** What the {@code envoy} command prints, and how many measured requests the service did not correct. */
  record Result(String table, long problems) {}

  /** One setup: its Envoy, the toy proxy in front of it and Envoy's access log. */
  private record Rig(Setup setup, ToyProxy proxy, AccessLogTail accessLog) {}

  /**
   * One measurement of {@code requests} turns: each setup's latencies in turn order, and the access-log lines
   * of those requests of (b) and (c), by leg.
   */
  private record Measurement(
      String label, long[][] nanos, Map<Setup, Map<String, List<AccessLogLine>>> lines, Map<Setup, JvmActivity> jvms) {
    /** The lines of (b) and (c), the setups with an ext_proc filter. */
    Map<Setup, Map<String, List<AccessLogLine>>> extProcLines() {
      Map<Setup, Map<String, List<AccessLogLine>>> filtered = new EnumMap<>(lines);
      filtered.keySet().removeIf(setup -> !setup.extProc());
      return filtered;
    }

    long corrected() {
      return lines.get(Setup.SERVICE).get("generation").stream().filter(l -> "rewritten".equals(l.field("usage_outcome"))).count();
    }
  }

  private final HttpClient client =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(5)).build();
  private final List<Rig> rigs = new ArrayList<>();
  /** The ext_proc JVMs of (b) and (c), whose JIT and collector activity each measurement reports. */
  private final Map<Setup, ExtProcChild> extProcs = new EnumMap<>(Setup.class);
  private final Consumer<String> log;

  private RealEngineRow(Consumer<String> log) {
    this.log = log;
  }

  /**
   * Starts the pair, the two ext_proc servers and the three Envoys (their logs in {@code logs/real-engine}),
   * measures and stops them.
   *
   * @throws AssertionError when vLLM, its model, Envoy or the shipped jar is missing (how to get it in the message)
   */
  static Result run(EnvoyBenchOptions o, Path logs, Consumer<String> log) throws IOException, InterruptedException {
    RealVllm.requireInstalled();
    InstalledTools.envoy(EnvoyChild.RELEASE);
    InstalledTools.serviceJar();
    Path dir = Files.createDirectories(logs.resolve("real-engine"));
    List<AutoCloseable> owned = new ArrayList<>();
    try {
      log.accept("real-engine row: starting the real vLLM pair (prefill and decode at once, about a minute on 2 cores)");
      RealVllm pair = own(owned, RealVllm.start(dir));
      log.accept(pair.readiness());
      ExtProcChild nullProcessor = own(owned, ExtProcChild.nullProcessor(dir));
      ExtProcChild service = own(owned, ExtProcChild.service(dir, o.serviceJvmOptions()));
      RealEngineRow row = new RealEngineRow(log);
      row.extProcs.put(Setup.NULL, nullProcessor);
      row.extProcs.put(Setup.SERVICE, service);
      for (Setup setup : Setup.values()) {
        // (a) keeps the shipped service cluster (unused, health-checked): point it at the null processor
        ExtProcChild extProc = setup == Setup.SERVICE ? service : nullProcessor;
        Topology topology = new Topology(FreePorts.next(), FreePorts.next(), FreePorts.next(),
            List.of(pair.prefill.port()), List.of(pair.decode.port()), List.of(extProc.grpcPort));
        EnvoyChild envoy = own(owned, EnvoyChild.start(setup, topology, dir));
        if (setup.extProc()) {
          envoy.awaitExtProcHealthy(Duration.ofSeconds(30));
        }
        ToyProxy proxy = own(owned, new ToyProxy(path -> url(envoy.contextPort(), path), path -> url(envoy.generationPort(), path)));
        row.rigs.add(new Rig(setup, proxy, envoy.accessLog()));
      }
      log.accept("real-engine row: " + o.realEngineWarmup() + " warm-up turns (one request per setup each)");
      row.warm(o.realEngineWarmup());
      Measurement asIs = row.measure("as is", o.realEngineRequests());
      Measurement kept;
      try (CpuKeepers keepers = CpuKeepers.start(dir)) {
        log.accept("real-engine row: " + keepers.count() + " CPU keepers started");
        row.warm(SETTLE_TURNS);
        kept = row.measure("with CPU keepers", o.realEngineRequests());
      }
      List<Measurement> measurements = List.of(asIs, kept);
      long problems = measurements.stream().mapToLong(m -> m.nanos()[0].length - m.corrected()).sum();
      return new Result(render(o, measurements), problems);
    } finally {
      for (AutoCloseable resource : owned) {
        try {
          resource.close();
        } catch (Exception e) {
          // closing the rest matters more
        }
      }
    }
  }

  private static <T extends AutoCloseable> T own(List<AutoCloseable> owned, T resource) {
    owned.add(0, resource);
    return resource;
  }

  private static String url(int port, String path) {
    return "http://127.0.0.1:" + port + path;
  }

  /** {@code count} turns, not measured; their access-log lines are read and dropped. */
  private void warm(int count) throws IOException, InterruptedException {
    Map<Setup, JvmActivity> since = jvmActivity();
    for (int i = 0; i < count; i++) {
      for (Rig rig : rigs) {
        send(rig);
      }
      if ((i + 1) % 250 == 0) {
        Map<Setup, JvmActivity> now = jvmActivity();
        StringBuilder line = new StringBuilder("  " + (i + 1) + " of " + count + " turns; in the last 250:");
        now.forEach((setup, activity) -> line.append(' ').append(setup.title()).append(' ')
            .append(activity.since(since.get(setup)).describe()).append(';'));
        log.accept(line.substring(0, line.length() - 1));
        since.putAll(now);
      }
    }
    for (Rig rig : rigs) {
      linesByLeg(rig, count);
    }
  }

  private Measurement measure(String label, int requests) throws IOException, InterruptedException {
    log.accept("real-engine row: measuring " + requests + " turns, " + label);
    Map<Setup, JvmActivity> before = jvmActivity();
    long[][] nanos = new long[rigs.size()][requests];
    for (int i = 0; i < requests; i++) {
      // a b c, b c a, c a b, …: each setup as often first, second and third
      for (int k = 0; k < rigs.size(); k++) {
        int setup = (i + k) % rigs.size();
        nanos[setup][i] = send(rigs.get(setup));
      }
    }
    Map<Setup, JvmActivity> during = jvmActivity();
    during.replaceAll((setup, after) -> after.since(before.get(setup)));
    Map<Setup, Map<String, List<AccessLogLine>>> lines = new EnumMap<>(Setup.class);
    for (Rig rig : rigs) {
      lines.put(rig.setup(), linesByLeg(rig, requests));
    }
    return new Measurement(label, nanos, lines, during);
  }

  /** The JIT and collector counters of the (b) and (c) JVMs now. */
  private Map<Setup, JvmActivity> jvmActivity() throws IOException, InterruptedException {
    Map<Setup, JvmActivity> now = new EnumMap<>(Setup.class);
    for (Map.Entry<Setup, ExtProcChild> e : extProcs.entrySet()) {
      now.put(e.getKey(), JvmActivity.read(e.getValue().pid()));
    }
    return now;
  }

  /** One P/D request with a fresh prompt through {@code rig}'s toy proxy; its latency in nanoseconds at the client. */
  private long send(Rig rig) throws IOException, InterruptedException {
    ObjectNode body = JSON.createObjectNode().put("model", RealVllm.MODEL);
    body.putArray("messages").addObject().put("role", "user").put("content", RealVllm.freshPrompt());
    body.put("max_tokens", MAX_TOKENS);
    HttpRequest request = HttpRequest.newBuilder(URI.create(rig.proxy().baseUrl() + PATH))
        .timeout(Duration.ofSeconds(60))
        .header("content-type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofByteArray(JSON.writeValueAsBytes(body)))
        .build();
    long begin = System.nanoTime();
    HttpResponse<String> answer = client.send(request, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
    long nanos = System.nanoTime() - begin;
    if (answer.statusCode() != 200) {
      throw new IllegalStateException(rig.setup().title() + ": the P/D request answered " + answer.statusCode() + ": "
          + answer.body() + " (logs in " + rig.accessLog().file().getParent() + ")");
    }
    return nanos;
  }

  /**
   * The access-log lines of the last {@code requests} requests through {@code rig}, by leg, once Envoy has
   * written them all (it flushes in its own time); the file is emptied after, so the next call reads only newer
   * requests.
   */
  private static Map<String, List<AccessLogLine>> linesByLeg(Rig rig, int requests) throws InterruptedException {
    Map<String, List<AccessLogLine>> byLeg = new LinkedHashMap<>();
    LEGS.forEach(leg -> byLeg.put(leg, new ArrayList<>()));
    boolean all = rig.accessLog().drain(text -> {
      AccessLogLine line = AccessLogLine.parse(text.toString());
      List<AccessLogLine> leg = byLeg.get(line.cluster());
      if (leg != null) {
        leg.add(line);
      }
    }, () -> byLeg.values().stream().allMatch(l -> l.size() >= requests), Duration.ofSeconds(10));
    if (!all) {
      throw new IllegalStateException(rig.setup().title() + ": access-log lines per leg " + LEGS.stream()
          .map(l -> l + " " + byLeg.get(l).size()).toList() + " after " + requests + " requests (" + rig.accessLog().file() + ")");
    }
    return byLeg;
  }

  /** An ext_proc latency field in microseconds; 0 where Envoy wrote {@code -} (no such call). */
  private static long micros(AccessLogLine line, String field) {
    return span(line, ShippedBootstrap.EXT_PROC_LATENCY_PREFIX + field);
  }

  /** A field of the line in microseconds; 0 where Envoy wrote {@code -}. */
  private static long span(AccessLogLine line, String field) {
    String value = line.field(field);
    return value.matches("\\d+") ? Long.parseLong(value) : 0;
  }

  /**
   * One SCHED_IDLE busy loop per CPU ({@code chrt --idle 0 sh -c 'while :; do :; done'}): a vCPU with one never
   * halts, so no hop waits for a vCPU to wake, and a normal task preempts the loop at once.
   */
  private static final class CpuKeepers implements AutoCloseable {
    private final List<ChildProcess> keepers = new ArrayList<>();

    static CpuKeepers start(Path dir) throws InterruptedException {
      CpuKeepers started = new CpuKeepers();
      try {
        for (int cpu = 0; cpu < Runtime.getRuntime().availableProcessors(); cpu++) {
          ChildProcess keeper = new ChildProcess("CPU keeper " + cpu, dir.resolve("cpu-keepers.log"), Duration.ofSeconds(2));
          started.keepers.add(keeper);
          keeper.launch(List.of("chrt", "--idle", "0", "sh", "-c", "while :; do :; done"));
        }
        Thread.sleep(200);
        for (ChildProcess keeper : started.keepers) {
          if (!keeper.isAlive()) {
            throw new IllegalStateException(keeper + " (chrt --idle 0) exited; " + keeper.logEnd());
          }
        }
        return started;
      } catch (RuntimeException | InterruptedException e) {
        started.close();
        throw e;
      }
    }

    int count() {
      return keepers.size();
    }

    @Override
    public void close() {
      keepers.forEach(ChildProcess::close);
    }
  }

  private static String render(EnvoyBenchOptions o, List<Measurement> measurements) {
    StringBuilder t = new StringBuilder(String.format(Locale.ROOT,
        "%n## In front of the real vLLM pair (issue 35)%n%n"
            + "Real vLLM 0.32 P/D pair (CPU, NIXL), vLLM's toy proxy, Envoy %s on the shipped bootstrap, %d chat"
            + " requests per setup (max_tokens %d, a fresh prompt each), the setups taking turns request by request,"
            + " one request at a time, after %d warm-up turns; client-observed latency of the whole P/D request, and"
            + " what Envoy recorded waiting for its ext_proc server (its call latencies, both legs, every call)."
            + " Measured twice in this run: as is, then with CPU keepers (one SCHED_IDLE busy loop per CPU),"
            + " because this VM's idle vCPUs halt and waking one costs ~0.1-0.25 ms, which every hop of a mostly idle,"
            + " one-request-at-a-time workload pays; the keepers keep the vCPUs awake and take only CPU time nobody"
            + " else wants.%n",
        EnvoyChild.RELEASE, o.realEngineRequests(), MAX_TOKENS, o.realEngineWarmup()));
    t.append(EnvoyBenchReport.serviceJvmOptions(o));
    for (Measurement m : measurements) {
      t.append(latencyTable(m));
      t.append(spanTable(m));
    }
    t.append(String.format(Locale.ROOT, "%n### Envoy's ext_proc call latencies per leg and phase (µs, p50 / p90)%n%n"
        + "| run | setup | leg | request headers | request body | response headers | response body |%n"
        + "|---|---|---|---|---|---|---|%n"));
    for (Measurement m : measurements) {
      m.extProcLines().forEach((setup, byLeg) -> byLeg.forEach((leg, lines) -> {
        t.append(String.format(Locale.ROOT, "| %s | %s | %s |", m.label(), setup.title(), leg));
        for (String field : ShippedBootstrap.EXT_PROC_LATENCIES) {
          long[] values = sorted(lines.stream().mapToLong(l -> micros(l, field)).toArray());
          t.append(String.format(Locale.ROOT, " %d / %d |", percentile(values, 50), percentile(values, 90)));
        }
        t.append(String.format(Locale.ROOT, "%n"));
      }));
    }
    return t.toString();
  }

  private static String latencyTable(Measurement m) {
    long[][] nanos = m.nanos();
    Map<Setup, long[]> waits = new EnumMap<>(Setup.class);
    m.extProcLines().forEach((setup, byLeg) -> waits.put(setup, sorted(sumOfLegs(byLeg, l -> {
      long sum = 0;
      for (String field : ShippedBootstrap.EXT_PROC_LATENCIES) {
        sum += micros(l, field);
      }
      return 1000 * sum;
    }))));
    StringBuilder t = new StringBuilder(String.format(Locale.ROOT, "%n### %s%n%n"
        + "| setup | p50 | p90 | p99 | Envoy's ext_proc wait p50 | p90 | p99 |%n|---|---|---|---|---|---|---|%n",
        Character.toUpperCase(m.label().charAt(0)) + m.label().substring(1)));
    for (Setup setup : Setup.values()) {
      long[] sorted = sorted(nanos[setup.ordinal()]);
      long[] w = waits.get(setup);
      t.append(String.format(Locale.ROOT, "| %s | %s | %s | %s | %s | %s | %s |%n", setup.title(),
          ms(percentile(sorted, 50)), ms(percentile(sorted, 90)), ms(percentile(sorted, 99)),
          w == null ? "-" : ms(percentile(w, 50)), w == null ? "-" : ms(percentile(w, 90)), w == null ? "-" : ms(percentile(w, 99))));
    }
    PairedDifferences nullAdds = PairedDifferences.of(nanos[Setup.NULL.ordinal()], nanos[Setup.BARE.ordinal()]);
    PairedDifferences serviceAdds = PairedDifferences.of(nanos[Setup.SERVICE.ordinal()], nanos[Setup.BARE.ordinal()]);
    PairedDifferences overNull = PairedDifferences.of(nanos[Setup.SERVICE.ordinal()], nanos[Setup.NULL.ordinal()]);
    t.append(String.format(Locale.ROOT,
        "%nAdded at the median over (a), as the median of the paired differences (each request against the (a)"
            + " request of the same turn), with a bootstrap 95 %% interval: (b) %s, (c) %s; (c) over (b): %s."
            + " Over the pairs whose two requests took the engines' same path (differing by under %d ms): (b) %s,"
            + " (c) %s; (c) over (b): %s. Envoy's ext_proc wait at the median, (c) − (b): %s. Corrected by the"
            + " service: %d of %d.%n",
        withInterval(nullAdds), withInterval(serviceAdds), withInterval(overNull),
        PairedDifferences.SAME_PATH_NANOS / 1_000_000,
        samePath(nullAdds), samePath(serviceAdds), samePath(overNull),
        ms(percentile(waits.get(Setup.SERVICE), 50) - percentile(waits.get(Setup.NULL), 50)),
        m.corrected(), nanos[Setup.SERVICE.ordinal()].length));
    StringBuilder jvms = new StringBuilder();
    m.jvms().forEach((setup, activity) -> jvms.append(jvms.length() == 0 ? "" : "; ").append(setup.title())
        .append(": ").append(activity.describe()));
    t.append(String.format(Locale.ROOT, "During these turns the ext_proc JVMs' JIT and collectors did: %s.%n", jvms));
    return t.toString();
  }

  /**
   * Where each setup's requests spent their time, from Envoy's spans ({@link ShippedBootstrap#ENVOY_SPAN},
   * {@link ShippedBootstrap#UPSTREAM_SPAN}) of both legs: the engines (upstream), inside Envoy less the upstream
   * (filters, ext_proc waits, Envoy's own work), and outside Envoy (the toy proxy, the client, the hops between).
   */
  private static String spanTable(Measurement m) {
    StringBuilder t = new StringBuilder(String.format(Locale.ROOT, "%n#### Where the time went, %s (ms; median, and"
        + " the median of the paired differences over (a))%n%n"
        + "| setup | engines (upstream, both legs) | over (a) | inside Envoy less upstream | over (a) | outside Envoy | over (a) |%n"
        + "|---|---|---|---|---|---|---|%n", m.label()));
    Map<Setup, long[][]> parts = new EnumMap<>(Setup.class);
    for (Setup setup : Setup.values()) {
      Map<String, List<AccessLogLine>> byLeg = m.lines().get(setup);
      long[] upstream = sumOfLegs(byLeg, l -> 1000 * span(l, ShippedBootstrap.UPSTREAM_SPAN));
      long[] envoy = sumOfLegs(byLeg, l -> 1000 * span(l, ShippedBootstrap.ENVOY_SPAN));
      long[] client = m.nanos()[setup.ordinal()];
      long[] inside = new long[upstream.length];
      long[] outside = new long[upstream.length];
      for (int i = 0; i < upstream.length; i++) {
        inside[i] = envoy[i] - upstream[i];
        outside[i] = client[i] - envoy[i];
      }
      parts.put(setup, new long[][] {upstream, inside, outside});
    }
    long[][] bare = parts.get(Setup.BARE);
    parts.forEach((setup, p) -> {
      t.append("| ").append(setup.title());
      for (int k = 0; k < p.length; k++) {
        t.append(" | ").append(ms(PairedDifferences.median(p[k]))).append(" | ")
            .append(setup == Setup.BARE ? "-" : ms(PairedDifferences.median(PairedDifferences.differences(p[k], bare[k]))));
      }
      t.append(String.format(Locale.ROOT, " |%n"));
    });
    return t.toString();
  }

  private static String withInterval(PairedDifferences p) {
    return String.format(Locale.ROOT, "%s (%.2f–%.2f)", ms(p.median()), p.low() / 1e6, p.high() / 1e6);
  }

  private static String samePath(PairedDifferences p) {
    return String.format(Locale.ROOT, "%s (%d of %d pairs)", ms(p.samePathMedian()), p.samePath(), p.pairs());
  }

  /** Per request, {@code value} of its context line plus that of its generation line. */
  private static long[] sumOfLegs(Map<String, List<AccessLogLine>> byLeg, ToLongFunction<AccessLogLine> value) {
    List<AccessLogLine> context = byLeg.get("context");
    List<AccessLogLine> generation = byLeg.get("generation");
    long[] sums = new long[context.size()];
    for (int i = 0; i < sums.length; i++) {
      sums[i] = value.applyAsLong(context.get(i)) + value.applyAsLong(generation.get(i));
    }
    return sums;
  }

  private static long[] sorted(long[] values) {
    long[] copy = values.clone();
    Arrays.sort(copy);
    return copy;
  }

  /** Nearest-rank percentile of sorted values. */
  private static long percentile(long[] sorted, int p) {
    int rank = (int) Math.ceil(p / 100.0 * sorted.length);
    return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))];
  }

  private static String ms(long nanos) {
    return String.format(Locale.ROOT, "%.2f ms", nanos / 1e6);
  }
}
