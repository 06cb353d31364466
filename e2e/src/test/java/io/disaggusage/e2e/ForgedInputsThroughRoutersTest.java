package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.e2e.TrueUsage.Usage;
import io.disaggusage.extproc.testkit.AccessLogLine;
import io.disaggusage.extproc.testkit.ForgedMembers;
import io.disaggusage.extproc.emulator.workers.EngineWorker;
import io.disaggusage.extproc.emulator.workers.RecordedRequest;
import io.disaggusage.extproc.testkit.Wire;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A client that pays for its tokens sends what the service, or a worker, might believe — headers and body
 * fields that only the P/D machinery should set — through each real router the suite runs, in front of
 * the simulated workers (the decode with the P/D cached count), one real Envoy and the shipped jar with its
 * shipped settings and no edge stripping. Every forged request runs beside an honest one (its own prompt,
 * at the same time); each input once on a fresh prompt (JSON) and once repeated (SSE). Both clients read
 * their truth: the forged input moves no number. The inputs that could have decided a phase are counted as
 * refused, and what each router forwarded to the workers is printed (docs/routers.md records it).
 */
class ForgedInputsThroughRoutersTest {
  static final String PROMPT = SglangRouterTest.PROMPT;
  static final String SHARED_ID = "{honest-flow-id}";

  /** The routers whose legs the service corrects (vllm-router merges usage itself: checked the same). */
  enum Router {
    VLLM_ROUTER,
    SGLANG_ROUTER,
    SMG_NIXL,
    SMG_SGLANG;

    RouterDeployment start(String release) {
      String name = "forged-" + name().toLowerCase(java.util.Locale.ROOT) + "-" + release;
      return switch (this) {
        case VLLM_ROUTER -> RouterDeployment.central(
            name, release, RouterKind.VLLM_ROUTER, VllmRouterTest.prefill(),
            VllmRouterTest.decode(io.disaggusage.extproc.emulator.engines.UsageVariant.BUG));
        case SGLANG_ROUTER -> RouterDeployment.podLocal(
            name, release, RouterKind.SGLANG_ROUTER, SglangRouterTest.prefill(), SglangRouterTest.decode());
        case SMG_NIXL -> SmgTest.Mode.NIXL.start("forged", release);
        case SMG_SGLANG -> SmgTest.Mode.SGLANG.start("forged", release);
      };
    }
  }

  /** What a client adds: headers, and body members put before the request's own. */
  record Forgery(String name, Map<String, String> headers, String members) {
    @Override
    public String toString() {
      return name;
    }
  }

  static final List<Forgery> FORGERIES = List.of(
      new Forgery("x-disagg-phase: prefill", Map.of("x-disagg-phase", "prefill"), ""),
      new Forgery("x-disagg-phase: context, with the honest flow's x-request-id",
          Map.of("x-disagg-phase", "context", "x-request-id", SHARED_ID), ""),
      new Forgery("x-disagg-phase: decode", Map.of("x-disagg-phase", "decode"), ""),
      new Forgery("x-disagg-request-id", Map.of("x-disagg-request-id", "forged-key"), ""),
      new Forgery("the honest flow's x-request-id", Map.of("x-request-id", SHARED_ID), ""),
      new Forgery("EPP-Profile: decode", Map.of("EPP-Profile", "decode"), ""),
      new Forgery("x-trtllm-msgpack: 1 on JSON", Map.of("x-trtllm-msgpack", "1"), ""),
      new Forgery("request_type context_only", Map.of(),
          ForgedMembers.disaggregatedParams(ForgedMembers.requestType("context_only"))),
      new Forgery("request_type generation_only", Map.of(),
          ForgedMembers.disaggregatedParams(ForgedMembers.requestType("generation_only"))),
      new Forgery("ctx_usage alone", Map.of(), ForgedMembers.disaggregatedParams(ForgedMembers.CTX_USAGE)),
      new Forgery("ctx_usage with generation_only", Map.of(), ForgedMembers.disaggregatedParams(
          ForgedMembers.requestType("generation_only") + "," + ForgedMembers.CTX_USAGE)),
      new Forgery("top-level kv_transfer_params", Map.of(),
          "\"kv_transfer_params\":{\"do_remote_decode\":true,\"do_remote_prefill\":false,\"forged_by\":\"client\"}"),
      new Forgery("vllm_xargs.kv_transfer_params", Map.of(),
          "\"vllm_xargs\":{\"kv_transfer_params\":{\"do_remote_prefill\":true,\"remote_engine_id\":\"x\"}}"),
      new Forgery("bootstrap_room reuse", Map.of(), "\"bootstrap_room\":12345,\"bootstrap_host\":\"127.0.0.9\""));

  static Stream<Arguments> routers() {
    return Tools.perRelease(List.of(Router.values()));
  }

  /**
   * The newest pinned release only: the guard's own behaviour on every release is EdgeGuardEnvoyTest's; here
   * what matters is what reaches the workers behind it, which the release does not change.
   */
  static Stream<Arguments> newestRelease() {
    return Stream.of(Router.values()).map(router -> Arguments.of(Tools.envoyReleases().get(0), router));
  }

  @ParameterizedTest(name = "Envoy {0}: {1}")
  @MethodSource("routers")
  void noForgedInputMovesTheForgersOrAnyOtherFlowsNumbers(String release, Router router) throws Exception {
    try (RouterDeployment deployment = router.start(release)) {
      runAll(Target.of(deployment), router + " (Envoy " + release + ")");
    }
  }

  /**
   * The same through the edge guard on the client-facing route ({@link EdgeGuardFront}: the shipped edge
   * bootstrap and jar in front of the router): no forged header or member reaches a worker, so the usage
   * service has nothing to refuse, and both clients of every pair read their truth.
   */
  @ParameterizedTest(name = "behind the edge guard, Envoy {0}: {1}")
  @MethodSource("newestRelease")
  void behindTheEdgeGuardNoForgedInputReachesAWorker(String release, Router router) throws Exception {
    try (RouterDeployment deployment = router.start(release);
        EdgeGuardFront front = EdgeGuardFront.start("forged-guard-" + router, release, deployment.router.port())) {
      Target target = Target.of(deployment).through(front.url("/v1/chat/completions"));
      Run run = runAll(target, router + " behind the edge guard (Envoy " + release + ")");
      run.forwarded.forEach((forgery, reached) -> assertThat(reached.values().stream().flatMap(List::stream))
          .as("what reached the workers of %s", forgery)
          .allMatch(entry -> entry.startsWith("header x-request-id") || entry.equals("body vllm_xargs")));
      assertThat(ServiceMetrics.refusedInputs(deployment.service)).as("nothing left to refuse").isEmpty();
      assertThat(Http.body(front.guard.adminUrl("/metrics")))
          .as("the guard counted what it took out")
          .containsPattern("(?m)^disagg_usage_edge_requests_total\\{outcome=\"stripped\"\\} [1-9]");
    }
  }

  /**
   * Every forgery of {@link #FORGERIES} through {@code target}, each beside an honest flow; prints what the
   * router forwarded and what the service refused, labelled {@code label}.
   */
  static Run runAll(Target target, String label) throws Exception {
    ExecutorService honestClients = Executors.newSingleThreadExecutor();
    try {
      Run run = new Run(target, label, honestClients);
      for (int i = 0; i < FORGERIES.size(); i++) {
        run.forgery(i);
      }
      assertThat(run.repeatsCached).as("the repeated prompts hit the prefill's cache").isPositive();
      System.out.printf("%s refused inputs: %s; pairs re-sent after Envoy gave up: %d%n", label,
          ServiceMetrics.refusedInputs(target.service()), run.failOpens);
      run.forwarded.forEach((name, reached) -> System.out.printf("%s forwarded %s: %s%n", label, name, reached));
      assertThat(run.problems).as("what the service counted").isEmpty();
      return run;
    } finally {
      honestClients.shutdownNow();
    }
  }

  /**
   * What a run needs of a deployment: the router's chat URL and the headers its clients must send (llm-d's
   * EPP's {@code x-prefiller-host-port}), the service, the two workers and the decode Envoy's completion lines.
   */
  record Target(String chatUrl, Map<String, String> routing, ServiceProcess service, EngineWorker prefill,
      EngineWorker decode, Supplier<List<AccessLogLine>> generations) {
    static Target of(RouterDeployment d) {
      return new Target(d.url("/v1/chat/completions"), Map.of(), d.service, d.prefill, d.decode,
          new GenerationLedger(d)::completions);
    }

    /** The same deployment, its clients calling {@code url} (a front such as the edge guard's) instead. */
    Target through(String url) {
      return new Target(url, routing, service, prefill, decode, generations);
    }

    /** What curl printed for {@code body} with the router's headers and {@code headers}. */
    String curl(String body, boolean stream, Map<String, String> headers) {
      Map<String, String> all = new LinkedHashMap<>(routing);
      all.putAll(headers);
      return RouterClients.curl(chatUrl, body, stream, all);
    }
  }

  /** One router's run: each forgery's pairs, what reached the workers, what the service counted. */
  static final class Run {
    /** Pairs re-sent at most this often when Envoy gave up on one of their exchanges (a loaded machine). */
    static final int ATTEMPTS = 3;

    final Target target;
    final String label;
    final ExecutorService honestClients;
    final TrueUsage truth = new TrueUsage(); // every prompt differs in its first words: independent of the others
    final List<String> problems = new ArrayList<>();
    final Map<String, Map<String, List<String>>> forwarded = new LinkedHashMap<>();
    long repeatsCached;
    int failOpens;

    Run(Target target, String label, ExecutorService honestClients) {
      this.target = target;
      this.label = label;
      this.honestClients = honestClients;
    }

    /**
     * Forgery {@code i} on a fresh prompt (JSON) and repeated (SSE), an honest flow beside each. Envoy gives
     * up on an exchange whose reply takes longer than the shipped 200 ms message timeout (a starved JVM on a
     * loaded machine) and lets the worker's usage through, counted {@code envoy_gave_up}: such an attempt
     * says nothing about the forgery, and is sent again on new prompts.
     */
    void forgery(int i) throws Exception {
      Forgery forgery = FORGERIES.get(i);
      for (int attempt = 1; ; attempt++) {
        long gaveUpBefore = gaveUp();
        try {
          pairs(i, attempt, forgery);
          return;
        } catch (AssertionError e) {
          if (gaveUp() == gaveUpBefore || attempt == ATTEMPTS) {
            throw e;
          }
          failOpens++;
        }
      }
    }

    private long gaveUp() {
      return ServiceMetrics.exchanges(target.service(), "generation").getOrDefault("envoy_gave_up", 0L);
    }

    private void pairs(int i, int attempt, Forgery forgery) throws Exception {
      String forgedPrompt = "Forger " + i + " try " + attempt + " asks: " + PROMPT;
      String honestPrompt = "Honest " + i + " try " + attempt + " asks: " + PROMPT;
      String honestId = "honest-" + label.replaceAll("[^A-Za-z0-9]+", "-") + i + "-" + attempt;
      for (boolean repeat : new boolean[] {false, true}) {
        boolean stream = repeat;
        long refusedBefore = total(ServiceMetrics.refusedInputs(target.service()));
        int linesBefore = target.generations().get().size();
        Usage wantForged = truth.next(forgedPrompt, 12, 1);
        Usage wantHonest = truth.next(honestPrompt, 12, 1);
        Future<Usage> honest = honestClients.submit(() -> RouterClients.read(RouterClients.usage(
            target.curl(RouterClients.chat(Wire.MODEL, honestPrompt, 12, 1, stream), stream,
                Map.of("x-request-id", honestId)),
            stream)));
        String body = withMembers(RouterClients.chat(Wire.MODEL, forgedPrompt, 12, 1, stream), forgery.members());
        Usage forged = RouterClients.read(RouterClients.usage(target.curl(body, stream, headers(forgery, honestId)), stream));
        Usage honestRead = honest.get();
        // Both generation exchanges logged before anything is judged: a failed attempt leaves none behind.
        Processes.await("the pair's two generation exchanges logged", Duration.ofSeconds(10),
            () -> target.generations().get().size() >= linesBefore + 2);
        assertThat(forged).as("%s, repeat=%s: the forger reads its truth", forgery, repeat).isEqualTo(wantForged);
        assertThat(honestRead).as("%s, repeat=%s: the honest flow beside it", forgery, repeat).isEqualTo(wantHonest);
        repeatsCached += repeat ? wantForged.cached() : 0;

        // Each generation exchange corrected (the client's truth was the service's doing, except behind
        // vllm-router, which merges usage itself).
        List<AccessLogLine> lines = target.generations().get();
        List<String> outcomes =
            lines.subList(linesBefore, lines.size()).stream().map(l -> l.field("usage_outcome")).toList();
        assertThat(outcomes).as("%s, repeat=%s: generation outcomes", forgery, repeat)
            .allMatch(ServiceMetrics.CORRECTED::contains);
        Map<String, List<String>> reached = reached(target, "Forger " + i + " try " + attempt + " asks");
        forwarded.put(forgery.name(), reached);
        long refused = total(ServiceMetrics.refusedInputs(target.service())) - refusedBefore;
        boolean refusable = reached.values().stream().flatMap(List::stream).anyMatch(REFUSABLE::contains);
        if (refusable != (refused > 0)) {
          problems.add(forgery + ", repeat=" + repeat + ": reached the workers " + reached + ", refused " + refused);
        }
      }
    }
  }

  /** Forged inputs that, once on a leg, the classifier must refuse. */
  static final List<String> REFUSABLE = List.of(
      "header x-disagg-phase", "header x-trtllm-msgpack", "body request_type", "body ctx_usage",
      "body client kv_transfer_params");

  private static long total(Map<String, Long> counts) {
    return counts.values().stream().mapToLong(Long::longValue).sum();
  }

  /** The forgery's headers, the honest flow's id in place of {@link #SHARED_ID}. */
  static Map<String, String> headers(Forgery forgery, String honestId) {
    Map<String, String> headers = new LinkedHashMap<>();
    forgery.headers().forEach((k, v) -> headers.put(k, v.equals(SHARED_ID) ? honestId : v));
    return headers;
  }

  /** {@code body} (a JSON object) with {@code members} inserted first; unchanged when there are none. */
  static String withMembers(String body, String members) {
    return members.isEmpty() ? body : "{" + members + "," + body.substring(1);
  }

  /**
   * Which forged headers and body members reached each worker in the requests whose body holds
   * {@code marker}: what the router forwards.
   */
  static Map<String, List<String>> reached(Target target, String marker) {
    Map<String, List<String>> seen = new TreeMap<>();
    seen.put("prefill", reached(target.prefill().log().completions(), marker));
    seen.put("decode", reached(target.decode().log().completions(), marker));
    return seen;
  }

  private static List<String> reached(List<RecordedRequest> all, String marker) {
    List<RecordedRequest> requests = all.stream().filter(r -> r.bodyUtf8().contains(marker)).toList();
    List<String> names = new ArrayList<>();
    for (String header :
        List.of("x-disagg-phase", "x-disagg-request-id", "epp-profile", "x-trtllm-msgpack", "x-request-id")) {
      requests.stream().flatMap(r -> r.headerValues(header).stream())
          .map(v -> v.replaceAll(LlmdWire.UUID_V1, "<uuid>")).distinct() // pd-sidecar's, one per flow
          .forEach(v -> names.add("header " + header + (header.equals("x-request-id") ? "=" + v : "")));
    }
    Map<String, String> members = new LinkedHashMap<>();
    members.put("\"request_type\"", "body request_type");
    members.put("\"ctx_usage\"", "body ctx_usage");
    members.put("\"vllm_xargs\"", "body vllm_xargs");
    members.put("\"bootstrap_room\":12345", "body forged bootstrap_room");
    members.put("\"forged_by\":\"client\"", "body client kv_transfer_params"); // gone where a router overwrites it
    members.forEach((text, name) -> {
      if (requests.stream().anyMatch(r -> r.bodyUtf8().contains(text))) {
        names.add(name);
      }
    });
    return names;
  }
}
