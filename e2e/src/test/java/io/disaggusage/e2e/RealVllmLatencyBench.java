package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.e2e.Orchestrator.Answer;
import io.disaggusage.extproc.testkit.FreePorts;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import io.disaggusage.extproc.testkit.ShippedBootstrap.Topology;
import io.disaggusage.extproc.testkit.ChildProcess;
import io.disaggusage.extproc.testkit.InstalledTools;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * A benchmark, not part of the suite (surefire runs {@code *Test} classes only): what the service adds to
 * a P/D request in front of the real vLLM pair ({@link RealVllmPair}, CPU, NIXL). A toy proxy
 * ({@link ProxyOrchestrator}, as vLLM's {@code toy_proxy_server.py}) sends each chat request to the prefill
 * and then the decode server through one of three Envoys on the newest pinned release, all on the shipped
 * bootstrap and straight to the same two servers: (a) without the ext_proc filter, (b) with it and the
 * bench's null processor (answers every message at once), (c) with it and the shipped jar. The setups take
 * turns request by request (a b c, b c a, c a b, …), one request at a time, each with a fresh prompt (no
 * prefix hit, the same mix for all), so drift on the machine falls on all alike. It prints, from this run,
 * each setup's client-observed latency of the whole P/D request (median, p90, p99), what (b) and (c) add
 * at the median as the median of the paired differences (each request against the (a) request of its turn),
 * and how long Envoy itself recorded waiting for its ext_proc server in (b) and (c): its call latencies
 * ({@code %FILTER_STATE(envoy.filters.http.ext_proc:FIELD:…)%} in the access log), summed over both legs.
 * On this machine the engines run on the same two CPUs as everything else: a process that wakes up to
 * answer Envoy waits for a core the engines hold, which the null processor pays as much as the service.
 *
 * <p>Run: {@code mvn -o -pl bench,e2e -am verify -Dtest=RealVllmLatencyBench -Dsurefire.failIfNoSpecifiedTests=false}
 * (the bench module for its null processor); {@code -Dbench.requests=N} per setup (default 200). The table
 * is in {@code e2e/target/surefire-reports/*RealVllmLatencyBench-output.txt}.
 */
class RealVllmLatencyBench {
  private static final String PATH = "/v1/chat/completions";
  private static final int REQUESTS = Integer.getInteger("bench.requests", 200);
  private static final int WARMUP = 20;
  private static final int MAX_TOKENS = 8;

  @Test
  void whatTheServiceAddsToAPdRequestOverEnvoyAlone() throws Exception {
    String release = Tools.envoyReleases().get(0);
    RealVllmPair pair = RealVllmPair.get();
    List<AutoCloseable> started = new ArrayList<>();
    try {
      ServiceProcess service = first(started, ServiceProcess.started("latency-service"));
      int nullPort = FreePorts.next();
      first(started, nullProcessor(nullPort));
      EnvoyProcess bare = first(started, envoy("latency-envoy-bare", release, pair, -1));
      EnvoyProcess floor = first(started, envoy("latency-envoy-null", release, pair, nullPort));
      EnvoyProcess filtered = first(started, envoy("latency-envoy-service", release, pair, service.grpcPort()));
      floor.awaitExtProcHealthy(Duration.ofSeconds(30));
      filtered.awaitExtProcHealthy(Duration.ofSeconds(30));
      List<ProxyOrchestrator> setups = List.of(first(started, new ProxyOrchestrator(bare)),
          first(started, new ProxyOrchestrator(floor)), first(started, new ProxyOrchestrator(filtered)));

      for (int i = 0; i < WARMUP; i++) {
        for (ProxyOrchestrator setup : setups) {
          send(setup);
        }
      }
      long rewrittenBefore = service.exchanges("generation", "rewritten");
      long[][] nanos = new long[setups.size()][REQUESTS];
      for (int i = 0; i < REQUESTS; i++) {
        // a b c, b c a, c a b, …: each setup as often first, second and third
        for (int k = 0; k < setups.size(); k++) {
          int setup = (i + k) % setups.size();
          nanos[setup][i] = send(setups.get(setup));
        }
      }
      long corrected = service.exchanges("generation", "rewritten") - rewrittenBefore;
      for (EnvoyProcess envoy : List.of(floor, filtered)) {
        Processes.await("the access log of " + envoy, Duration.ofSeconds(5),
            () -> envoy.accessLog("generation").size() >= WARMUP + REQUESTS);
      }
      System.out.print(table(release, nanos, extProcWaits(floor, REQUESTS), extProcWaits(filtered, REQUESTS), corrected));
      assertThat(corrected).as("every request through the service had its usage corrected").isEqualTo(REQUESTS);
    } finally {
      RouterDeployment.closeAll(started);
    }
  }

  /**
   * The bench's null processor (answers every message at once, asks for the same messages as the service)
   * as a process of its own on {@code port}, from the bench's jar: build it first
   * ({@code mvn -pl bench,e2e -am verify -Dtest=RealVllmLatencyBench …}).
   */
  private static ChildProcess nullProcessor(int port) {
    Path jar = InstalledTools.root().resolve("bench/target/disagg-usage-bench.jar");
    assertThat(jar).as("the bench's jar, with its null processor: mvn -B -pl bench -am package -DskipTests").exists();
    ChildProcess child = new ChildProcess("null-processor", Tools.logs().resolve("latency-null-processor.log"), Duration.ofSeconds(5));
    child.launch(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-cp", jar.toString(),
        "io.disaggusage.bench.envoy.NullProcessorServer", Integer.toString(port)));
    return child;
  }

  /**
   * An Envoy on the shipped bootstrap in front of the pair itself (no tap), its ext_proc filter calling
   * {@code extProcPort} with Envoy's call latencies in the access log, or without the filter ({@code -1}).
   */
  private static EnvoyProcess envoy(String name, String release, RealVllmPair pair, int extProcPort) {
    Topology topology = new Topology(FreePorts.next(), FreePorts.next(), FreePorts.next(),
        List.of(pair.prefill.port()), List.of(pair.decode.port()), List.of(extProcPort < 0 ? FreePorts.next() : extProcPort));
    ObjectNode bootstrap = ShippedBootstrap.rewrite(Tools.shippedBootstrap(), topology);
    if (extProcPort < 0) {
      return EnvoyProcess.start(name, release, ShippedBootstrap.withoutExtProc(bootstrap), topology);
    }
    return EnvoyProcess.start(name, release, ShippedBootstrap.withExtProcLatencies(bootstrap), topology);
  }

  /**
   * What Envoy waited for the service in each of the last {@code requests} P/D requests: the sum of its
   * ext_proc call latencies over both legs (context and generation lines in order), in nanoseconds.
   */
  private static long[] extProcWaits(EnvoyProcess envoy, int requests) {
    List<AccessLogLine> context = envoy.accessLog("context");
    List<AccessLogLine> generation = envoy.accessLog("generation");
    long[] waits = new long[requests];
    for (int i = 0; i < requests; i++) {
      waits[i] = 1000 * (micros(context.get(context.size() - requests + i)) + micros(generation.get(generation.size() - requests + i)));
    }
    return waits;
  }

  private static long micros(AccessLogLine line) {
    long sum = 0;
    for (String field : ShippedBootstrap.EXT_PROC_LATENCIES) {
      String value = line.field(ShippedBootstrap.EXT_PROC_LATENCY_PREFIX + field);
      assertThat(value).as("Envoy recorded %s: %s", field, line).matches("\\d+");
      sum += Long.parseLong(value);
    }
    return sum;
  }

  /** One P/D request with a fresh prompt; its latency in nanoseconds at the client. */
  private static long send(ProxyOrchestrator proxy) throws Exception {
    String body = RealVllmTest.Shape.CHAT_JSON.body(RealVllmTest.freshPrompt(), MAX_TOKENS);
    long begin = System.nanoTime();
    Answer answer = Orchestrator.post(proxy.baseUrl() + PATH, Map.of(), body.getBytes(StandardCharsets.UTF_8)).get();
    long nanos = System.nanoTime() - begin;
    assertThat(answer.status()).as(answer.text()).isEqualTo(200);
    return nanos;
  }

  private static final String[] SETUPS = {"(a) Envoy alone", "(b) Envoy + null processor", "(c) Envoy + this service"};

  private static String table(String release, long[][] nanos, long[] nullWaits, long[] serviceWaits, long corrected) {
    StringBuilder t = new StringBuilder(String.format(Locale.ROOT,
        "%nReal vLLM 0.32 P/D pair (CPU, NIXL), toy proxy, Envoy %s, %d chat requests per setup (max_tokens %d,"
            + " fresh prompt), the setups taking turns request by request, one request at a time;"
            + " client-observed latency of the whole P/D request, and what Envoy recorded waiting for its ext_proc"
            + " server (its call latencies, both legs, every call)%n"
            + "| setup | p50 | p90 | p99 | Envoy's ext_proc wait p50 | p90 | p99 |%n|---|---|---|---|---|---|---|%n",
        release, nanos[0].length, MAX_TOKENS));
    for (int s = 0; s < SETUPS.length; s++) {
      long[] sorted = sorted(nanos[s]);
      long[] waits = s == 0 ? null : sorted(s == 1 ? nullWaits : serviceWaits);
      t.append(String.format(Locale.ROOT, "| %s | %s | %s | %s | %s | %s | %s |%n", SETUPS[s],
          ms(percentile(sorted, 50)), ms(percentile(sorted, 90)), ms(percentile(sorted, 99)),
          waits == null ? "-" : ms(percentile(waits, 50)), waits == null ? "-" : ms(percentile(waits, 90)),
          waits == null ? "-" : ms(percentile(waits, 99))));
    }
    t.append(String.format(Locale.ROOT,
        "%nAdded at the median over (a), as the median of the paired differences (each request against the (a)"
            + " request of the same turn): (b) %s, (c) %s; (c) over (b): %s. Envoy's ext_proc wait at the median,"
            + " (c) − (b): %s. Corrected by the service: %d of %d.%n",
        ms(pairedMedian(nanos[1], nanos[0])), ms(pairedMedian(nanos[2], nanos[0])), ms(pairedMedian(nanos[2], nanos[1])),
        ms(percentile(sorted(serviceWaits), 50) - percentile(sorted(nullWaits), 50)), corrected, nanos[2].length));
    return t.toString();
  }

  private static long pairedMedian(long[] x, long[] y) {
    long[] d = new long[x.length];
    for (int i = 0; i < x.length; i++) {
      d[i] = x[i] - y[i];
    }
    return percentile(sorted(d), 50);
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

  private static <T extends AutoCloseable> T first(List<AutoCloseable> started, T child) {
    started.add(0, child);
    return child;
  }
}
