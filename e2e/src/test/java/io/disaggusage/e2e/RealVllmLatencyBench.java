package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.e2e.Orchestrator.Answer;
import io.disaggusage.extproc.testkit.FreePorts;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import io.disaggusage.extproc.testkit.ShippedBootstrap.Topology;
import java.nio.charset.StandardCharsets;
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
 * and then the decode server through one of two Envoys on the newest pinned release, both on the shipped
 * bootstrap and straight to the same two servers: (a) without the ext_proc filter, (b) with it and the
 * shipped jar. The requests alternate a, b, b, a, … one at a time, each with a fresh prompt (no prefix
 * hit, the same mix for both), so drift on the machine falls on both alike. It prints, from this run, each
 * setup's client-observed latency of the whole P/D request (median, p90, p99) and what (b) adds at the
 * median, both as the difference of the medians and as the median of the paired differences (each (b)
 * request against the (a) request next to it), and how long Envoy itself recorded waiting for the service
 * in (b): its ext_proc call latencies ({@code %FILTER_STATE(envoy.filters.http.ext_proc:FIELD:…)%} in the
 * access log), summed over both legs. On this machine the engines run on the same CPUs as the service, so
 * the end-to-end difference also holds what the service's CPU time cost the engines; Envoy's own figure is
 * the service's share of the request.
 *
 * <p>Run: {@code mvn -o -pl e2e -am verify -Dtest=RealVllmLatencyBench -Dsurefire.failIfNoSpecifiedTests=false};
 * {@code -Dbench.requests=N} per setup (default 200). The table is in
 * {@code e2e/target/surefire-reports/*RealVllmLatencyBench-output.txt}.
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
      EnvoyProcess bare = first(started, envoy("latency-envoy-bare", release, pair, service, false));
      EnvoyProcess filtered = first(started, envoy("latency-envoy-service", release, pair, service, true));
      filtered.awaitExtProcHealthy(Duration.ofSeconds(30));
      ProxyOrchestrator viaBare = first(started, new ProxyOrchestrator(bare));
      ProxyOrchestrator viaService = first(started, new ProxyOrchestrator(filtered));

      for (int i = 0; i < WARMUP; i++) {
        send(viaBare);
        send(viaService);
      }
      long rewrittenBefore = service.exchanges("generation", "rewritten");
      long[] a = new long[REQUESTS];
      long[] b = new long[REQUESTS];
      for (int i = 0; i < REQUESTS; i++) {
        // a, b, b, a, …: neither setup always goes first after the other's request
        if (i % 2 == 0) {
          a[i] = send(viaBare);
          b[i] = send(viaService);
        } else {
          b[i] = send(viaService);
          a[i] = send(viaBare);
        }
      }
      long corrected = service.exchanges("generation", "rewritten") - rewrittenBefore;
      Processes.await("the filtered Envoy's access log", Duration.ofSeconds(5),
          () -> filtered.accessLog("generation").size() >= WARMUP + REQUESTS);
      System.out.print(table(release, a, b, extProcWaits(filtered, REQUESTS), corrected));
      assertThat(corrected).as("every request through the service had its usage corrected").isEqualTo(REQUESTS);
    } finally {
      RouterDeployment.closeAll(started);
    }
  }

  /** An Envoy on the shipped bootstrap in front of the pair itself (no tap); {@code extProc}: with the filter. */
  private static EnvoyProcess envoy(String name, String release, RealVllmPair pair, ServiceProcess service, boolean extProc) {
    Topology topology = new Topology(FreePorts.next(), FreePorts.next(), FreePorts.next(),
        List.of(pair.prefill.port()), List.of(pair.decode.port()), List.of(service.grpcPort()));
    ObjectNode bootstrap = ShippedBootstrap.rewrite(Tools.shippedBootstrap(), topology);
    if (!extProc) {
      return EnvoyProcess.start(name, release, ShippedBootstrap.withoutExtProc(bootstrap), topology);
    }
    for (JsonNode listener : bootstrap.at("/static_resources/listeners")) {
      ObjectNode format = (ObjectNode) listener.at("/filter_chains/0/filters/0/typed_config/access_log/0/typed_config/log_format/text_format_source");
      String line = format.path("inline_string").asText();
      format.put("inline_string", line.substring(0, line.length() - 1) + EXT_PROC_WAIT_FIELDS + "\n");
    }
    return EnvoyProcess.start(name, release, bootstrap, topology);
  }

  /**
   * Envoy's own record of how long each of its ext_proc calls waited for the service's reply
   * ({@code ExtProcLoggingInfo}, one access-log field each): the service's share of a leg, apart from what
   * the engine took.
   */
  private static final List<String> EXT_PROC_WAITS = List.of(
      "request_header_latency_us", "request_body_total_latency_us", "response_header_latency_us",
      "response_body_total_latency_us");
  private static final String EXT_PROC_WAIT_FIELDS = EXT_PROC_WAITS.stream()
      .map(f -> " xp_" + f + "=%FILTER_STATE(envoy.filters.http.ext_proc:FIELD:" + f + ")%")
      .collect(java.util.stream.Collectors.joining());

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
    for (String field : EXT_PROC_WAITS) {
      String value = line.field("xp_" + field);
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

  private static String table(String release, long[] a, long[] b, long[] waits, long corrected) {
    long[] paired = new long[a.length];
    for (int i = 0; i < a.length; i++) {
      paired[i] = b[i] - a[i];
    }
    long[] sa = sorted(a);
    long[] sb = sorted(b);
    return String.format(Locale.ROOT,
        "%nReal vLLM 0.32 P/D pair (CPU, NIXL), toy proxy, Envoy %s, %d chat requests per setup (max_tokens %d,"
            + " fresh prompt), alternating, one at a time; client-observed latency of the whole P/D request%n"
            + "| setup | p50 | p90 | p99 |%n|---|---|---|---|%n"
            + "| (a) Envoy alone | %s | %s | %s |%n"
            + "| (b) Envoy + this service | %s | %s | %s |%n%n"
            + "(b) adds at the median: %s (difference of the medians), %s (median of the paired differences);"
            + " corrected by the service: %d of %d%n"
            + "Of (b), what Envoy itself recorded waiting for the service per P/D request (its ext_proc call"
            + " latencies, both legs, every call): p50 %s, p90 %s, p99 %s. The rest of the difference is the"
            + " machine: the service's process takes CPU the two engine processes on the same %d cores would"
            + " otherwise have had.%n",
        release, a.length, MAX_TOKENS,
        ms(percentile(sa, 50)), ms(percentile(sa, 90)), ms(percentile(sa, 99)),
        ms(percentile(sb, 50)), ms(percentile(sb, 90)), ms(percentile(sb, 99)),
        ms(percentile(sb, 50) - percentile(sa, 50)), ms(percentile(sorted(paired), 50)), corrected, b.length,
        ms(percentile(sorted(waits), 50)), ms(percentile(sorted(waits), 90)), ms(percentile(sorted(waits), 99)),
        Runtime.getRuntime().availableProcessors());
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
