package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.disaggusage.e2e.TrueUsage.Usage;
import io.disaggusage.extproc.emulator.engines.UsageVariant;
import io.disaggusage.extproc.emulator.workers.RecordedRequest;
import io.disaggusage.extproc.emulator.workers.WorkerSpec;
import io.disaggusage.extproc.testkit.Wire;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * SMG 1.13 (Shepherd Model Gateway, sglang-router's successor) in each of its HTTP P/D modes, its worker URLs
 * real Envoy listeners on the shipped settings in front of simulated workers, the shipped jar behind them:
 * <ul>
 *   <li>{@link Mode#SGLANG}: SGLang workers, {@code --prefill URL BOOTSTRAP_PORT}, one Envoy beside each worker
 *       (topology 3, so {@code bootstrap_host} — the host of SMG's prefill URL — is the prefill pod); legs in
 *       parallel, joined by {@code bootstrap_host} and {@code bootstrap_room};
 *   <li>{@link Mode#NIXL}, {@link Mode#MOONCAKE}: vLLM workers registered through {@code POST /workers} with that
 *       KV connector, one Envoy in front of both (topology 1); legs in sequence, the only thing they share the KV
 *       transfer's parameters (NIXL: what the prefill returned, relayed; Mooncake: a {@code transfer_id} SMG mints);
 *   <li>{@link Mode#CONNECTORLESS}: vLLM workers on SMG's command line without a bootstrap port: nothing shared, the
 *       decode prefills the prompt again and reports its own cache, which the service passes through
 *       ({@code passthrough_no_context}): the mode cannot be corrected, and needs no correction.
 * </ul>
 * SMG sends no {@code X-Request-Id} (each leg carries the one its Envoy generated) and merges no usage: the client
 * reads the decode's, corrected by the service. Every case asserts the client's usage (the prefill's prompt-side
 * counts, the decode's completion), Envoy's access-log metadata and {@code disagg_usage_exchanges_total}.
 */
class SmgTest {
  static final String PROMPT = SglangRouterTest.PROMPT;
  /** A second prompt whose first block differs from {@link #PROMPT}'s: its own cache history. */
  static final String OTHER_PROMPT =
      "Describe the building of the Great Wall of China, its dynasties, its materials and its purpose over two"
          + " thousand years in plain words";
  /** What SMG asks a SGLang worker at registration (GETs; {@code /loads} and {@code /v1/loads} answer 404), then {@code /metrics} every 10 s. */
  static final List<String> SGLANG_PROBES =
      List.of("/health", "/v1/models", "/server_info", "/model_info", "/loads", "/v1/loads", "/metrics");
  /** What SMG asks a vLLM worker at registration ({@code /version}, {@code /loads}, {@code /v1/loads} answer 404), then {@code /metrics}. */
  static final List<String> VLLM_PROBES = List.of("/health", "/v1/models", "/version", "/loads", "/v1/loads", "/metrics");

  /** SMG's HTTP P/D modes. */
  enum Mode {
    SGLANG(RouterKind.SMG_SGLANG, true, SGLANG_PROBES, RouterWire::assertSmgSglang),
    NIXL(RouterKind.SMG_NIXL, true, VLLM_PROBES, RouterWire::assertSmgNixl),
    MOONCAKE(RouterKind.SMG_MOONCAKE, true, VLLM_PROBES, RouterWire::assertSmgMooncake),
    CONNECTORLESS(RouterKind.SMG_VLLM, false, VLLM_PROBES, RouterWire::assertSmgVllm);

    final RouterKind kind;
    /** Whether the legs share a key, so the service must correct the decode's usage. */
    final boolean correctable;
    final List<String> probes;
    final Consumer<RouterDeployment> wire;

    Mode(RouterKind kind, boolean correctable, List<String> probes, Consumer<RouterDeployment> wire) {
      this.kind = kind;
      this.correctable = correctable;
      this.probes = probes;
      this.wire = wire;
    }

    RouterDeployment start(String test, String release) {
      return this == SGLANG ? start(test, release, SglangRouterTest.prefill()) : start(test, release, VllmRouterTest.prefill());
    }

    /** SGLang: the pod-local layout sglang-router's tests use; vLLM: the central one vllm-router's use. */
    RouterDeployment start(String test, String release, WorkerSpec prefill) {
      String name = "smg-" + name().toLowerCase(java.util.Locale.ROOT) + "-" + test + "-" + release;
      return this == SGLANG
          ? RouterDeployment.podLocal(name, release, kind, prefill, SglangRouterTest.decode())
          : RouterDeployment.central(name, release, kind, prefill, VllmRouterTest.decode(UsageVariant.BUG));
    }

    /**
     * Every exchange accounted as the mode allows: corrected ({@link RouterFlows#assertEveryExchange}), or, where
     * the legs share nothing, passed through with the decode's own usage.
     */
    void assertAccounted(RouterDeployment deployment, List<Usage> expected) {
      if (correctable) {
        RouterFlows.assertEveryExchange(deployment, expected);
      } else {
        assertPassedThrough(deployment, expected.size());
        assertThat(deployment.prefill.log().completions()).hasSize(expected.size());
      }
    }
  }

  static Stream<Arguments> everyMode() {
    return Tools.perRelease(List.of(Mode.values()));
  }

  static Stream<Arguments> vllmModes() {
    return Tools.perRelease(List.of(Mode.NIXL, Mode.MOONCAKE, Mode.CONNECTORLESS));
  }

  @ParameterizedTest(name = "Envoy {0}, {1}: curl -s and -N, a repeated prompt; SMG's wire; its probes untouched")
  @MethodSource("everyMode")
  void curlReadsThePrefillsUsage(String release, Mode mode) {
    try (RouterDeployment deployment = mode.start("curl", release)) {
      TrueUsage truth = new TrueUsage();
      List<Usage> expected = new ArrayList<>();
      List<Usage> read = new ArrayList<>();
      for (boolean stream : new boolean[] {false, false, true, true}) {
        expected.add(truth.next(PROMPT, 12, 1));
        String body = RouterClients.curl(deployment, RouterClients.chat(Wire.MODEL, PROMPT, 12, 1, stream), stream);
        read.add(RouterClients.read(RouterClients.usage(body, stream)));
      }
      assertThat(expected.get(1).cached()).as("the repeated prompt hits the prefill's cache").isPositive();
      // SMG's own behaviour first, whatever the service made of it: its legs, and its probes passed untouched
      mode.wire.accept(deployment);
      List<String> compared = new ArrayList<>(DiscoveryPassThrough.COMPARED);
      mode.probes.stream().filter(p -> !compared.contains(p)).forEach(compared::add);
      DiscoveryPassThrough.assertPassedUntouched(deployment, mode.probes, mode.probes, compared);
      assertThat(read).as("what the clients read (JSON, JSON, SSE, SSE)").isEqualTo(expected);
      mode.assertAccounted(deployment, expected);
      if (mode.correctable) {
        assertThat(ServiceMetrics.exchanges(deployment.service, "context"))
            .as("no probe counted as a context exchange").containsExactlyEntriesOf(Map.of("stored", (long) expected.size()));
      }
      assertThat(ServiceMetrics.generationExchanges(deployment.service)).as("no probe counted as a generation exchange")
          .isEqualTo(expected.size());
    }
  }

  @ParameterizedTest(name = "Envoy {0}, {1}: OpenAI Python SDK, JSON then SSE")
  @MethodSource("everyMode")
  void sdkReadsThePrefillsUsage(String release, Mode mode) {
    try (RouterDeployment deployment = mode.start("sdk", release)) {
      List<Usage> expected = new ArrayList<>(RouterFlows.sdk(deployment, PROMPT, false, 2));
      expected.addAll(RouterFlows.sdk(deployment, OTHER_PROMPT, true, 2));
      mode.assertAccounted(deployment, expected);
    }
  }

  @ParameterizedTest(name = "Envoy {0}, {1}: /v1/completions, curl -s and -N, then the OpenAI SDK's JSON and SSE")
  @MethodSource("everyMode")
  void completionsReadThePrefillsUsage(String release, Mode mode) {
    try (RouterDeployment deployment = mode.start("completions", release)) {
      TrueUsage truth = new TrueUsage();
      List<Usage> expected = new ArrayList<>();
      List<Usage> read = new ArrayList<>();
      for (boolean stream : new boolean[] {false, true}) {
        expected.add(truth.nextCompletion(PROMPT, 12, 1));
        String body = RouterClients.curl(deployment.url("/v1/completions"), RouterClients.completion(Wire.MODEL, PROMPT, 12, stream), stream);
        read.add(RouterClients.read(RouterClients.usage(body, stream)));
      }
      for (boolean stream : new boolean[] {false, true}) {
        expected.add(truth.nextCompletion(PROMPT, RouterClients.SDK_MAX_TOKENS, 1));
        read.add(RouterClients.read(RouterClients.sdkUsage(deployment.url(""), "completions", PROMPT, stream)));
      }
      assertThat(expected.get(1).cached()).as("the repeated prompt hits the prefill's cache").isPositive();
      List<RecordedRequest> legs = new ArrayList<>(deployment.decode.log().completions());
      legs.addAll(deployment.prefill.log().completions());
      assertThat(legs).hasSize(2 * expected.size()).allSatisfy(leg -> {
        assertThat(leg.path()).isEqualTo("/v1/completions");
        assertThat(RouterClients.parseJson(leg.bodyUtf8()).path("prompt").asText()).isEqualTo(PROMPT);
      });
      assertThat(read).as("what the clients read (curl JSON, SSE, SDK JSON, SSE)").isEqualTo(expected);
      mode.assertAccounted(deployment, expected);
    }
  }

  @ParameterizedTest(name = "Envoy {0}, {1}: 16 concurrent flows, each with its own true usage")
  @MethodSource("everyMode")
  void concurrentFlowsAreNeverCrossMatched(String release, Mode mode) throws Exception {
    try (RouterDeployment deployment = mode.start("concurrent", release)) {
      if (mode.correctable) {
        RouterFlows.concurrent(deployment, Map.of());
        return;
      }
      TrueUsage truth = new TrueUsage(); // the decode's own cache, which sees the same prompts in the same order
      ConcurrentFlows.Sent sent = ConcurrentFlows.run(flow -> truth, flow -> flow % 2 == 1,
          (flow, body, stream) -> RouterClients.read(RouterClients.usage(RouterClients.curl(deployment, body, stream), stream)),
          () -> "the service's generation outcomes " + ServiceMetrics.exchanges(deployment.service, "generation"));
      assertPassedThrough(deployment, sent.expected().size());
    }
  }

  @ParameterizedTest(name = "Envoy {0}, SGLANG: n=3, stream={1}: bootstrap arrays")
  @MethodSource("io.disaggusage.e2e.SglangRouterTest#streamedOrNot")
  void sglangChoicesShareOnePrefill(String release, boolean stream) {
    try (RouterDeployment deployment = Mode.SGLANG.start("n3-" + stream, release)) {
      List<Usage> expected = RouterFlows.curl(deployment, PROMPT, 5, 3, stream, stream);
      for (RecordedRequest request : deployment.decode.log().completions()) {
        JsonNode body = RouterClients.parseJson(request.bodyUtf8());
        for (String field : List.of("bootstrap_room", "bootstrap_host", "bootstrap_port")) {
          assertThat(body.path(field).isArray()).as(field + " in " + request.bodyUtf8()).isTrue();
          assertThat(body.path(field)).as(field).hasSize(3);
        }
      }
      RouterFlows.assertEveryExchange(deployment, expected);
    }
  }

  /**
   * SMG sends a vLLM request with {@code n > 1} to the decode worker alone, without {@code kv_transfer_params}
   * ("decode recomputes the prompt locally"): there is no prefill leg, the decode's usage is its own and true,
   * and the service passes it through.
   */
  @ParameterizedTest(name = "Envoy {0}, {1}: n=2 goes to the decode alone, its own usage passed through")
  @MethodSource("vllmModes")
  void vllmChoicesGoToTheDecodeAlone(String release, Mode mode) {
    try (RouterDeployment deployment = mode.start("n2", release)) {
      List<Usage> expected = RouterFlows.curl(deployment, PROMPT, 5, 2, false, false, true);
      assertThat(expected.get(1).cached()).as("the decode's own cache hit on the repeat").isPositive();
      assertThat(deployment.prefill.log().completions()).as("no prefill leg").isEmpty();
      assertThat(deployment.decode.log().completions()).hasSize(expected.size()).allSatisfy(request ->
          assertThat(RouterClients.parseJson(request.bodyUtf8()).has("kv_transfer_params")).as(request.bodyUtf8()).isFalse());
      assertPassedThrough(deployment, expected.size());
    }
  }

  @ParameterizedTest(name = "Envoy {0}, SGLANG: the prefill answers 400 ms after the decode, JSON and SSE")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void sglangDecodeWaitsForALatePrefill(String release) {
    Duration delay = Duration.ofMillis(400);
    try (RouterDeployment deployment = Mode.SGLANG.start("late", release, SglangRouterTest.prefill().withPrefillDelay(delay))) {
      RouterFlows.assertEveryExchange(deployment, RouterFlows.curl(deployment, PROMPT, 6, 1, false, true));
      assertThat(new GenerationLedger(deployment).completions())
          .as("each generation reply was held until the late context usage arrived")
          .allSatisfy(line -> assertThat(line.durationMillis()).isGreaterThanOrEqualTo(delay.toMillis()));
    }
  }

  /**
   * {@code count} generation exchanges, each passed through with the decode's own usage: outcome
   * {@code passthrough_no_context} in Envoy's access log (with the decode's own counts, read for counts that
   * cannot be true) and in the service's counter, and nothing corrected.
   */
  static void assertPassedThrough(RouterDeployment deployment, int count) {
    GenerationLedger ledger = new GenerationLedger(deployment);
    Processes.await(count + " generation exchanges logged and counted", Duration.ofSeconds(10),
        () -> ledger.completions().size() >= count && ServiceMetrics.generationExchanges(deployment.service) >= count);
    assertThat(ledger.completions()).hasSize(count).allSatisfy(line -> {
      assertThat(line.status()).isEqualTo(200);
      assertThat(line.field("usage_outcome")).as(line.toString()).isEqualTo("passthrough_no_context");
      assertThat(line.field("cached_tokens")).as(line.toString() + ": the decode's own count, not rewritten")
          .isEqualTo(line.field("reported_cached_tokens")).isNotEqualTo("-");
    });
    assertThat(ServiceMetrics.exchanges(deployment.service, "generation"))
        .containsExactlyEntriesOf(Map.of("passthrough_no_context", (long) count));
    assertThat(deployment.decode.log().completions()).hasSize(count);
  }
}
