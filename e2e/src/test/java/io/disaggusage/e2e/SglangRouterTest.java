package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.disaggusage.e2e.TrueUsage.Usage;
import io.disaggusage.extproc.scenario.Wire;
import io.disaggusage.extproc.simulation.engines.UsageVariant;
import io.disaggusage.extproc.simulation.workers.EngineKind;
import io.disaggusage.extproc.simulation.workers.RecordedRequest;
import io.disaggusage.extproc.simulation.workers.WorkerRole;
import io.disaggusage.extproc.simulation.workers.WorkerSpec;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.stream.IntStream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * sglang-router 0.3.2 ({@code --pd-disaggregation}) in front of a SGLang prefill and a SGLang decode
 * worker with the decode radix-cache bug (#25972: a repeated prompt's cached count doubles), each worker
 * reached through real Envoy and the shipped jar. The router sends the same body to both in parallel,
 * drops the prefill's answer and passes the decode's usage on, and closes its decode connection right
 * after {@code data: [DONE]}. For every exchange: the client reads the prefill's true usage, Envoy's
 * generation listener logs it as {@code rewritten} metadata, and the service counts it.
 */
class SglangRouterTest {
  /** 25 tokens: a repeat reuses one 16-token block. */
  static final String PROMPT =
      "Summarise the history of the Roman aqueducts, their engineering, their maintenance and their decline"
          + " over the centuries in plain words";
  static final List<String> ROUTER_PROBES = List.of(
      "/health", "/server_info", "/model_info", "/sglang.grpc.scheduler.SglangScheduler/HealthCheck",
      "/vllm.grpc.engine.VllmEngine/HealthCheck");

  static WorkerSpec prefill() {
    return WorkerSpec.of(EngineKind.SGLANG, WorkerRole.PREFILL, RouterDeployment.PREFILL_POD, 0).withModel(Wire.MODEL);
  }

  static WorkerSpec decode() {
    return WorkerSpec.of(EngineKind.SGLANG, WorkerRole.DECODE, RouterDeployment.DECODE_POD, 0)
        .withModel(Wire.MODEL).withVariant(UsageVariant.BUG).withTokenDelay(Duration.ofMillis(2));
  }

  static RouterDeployment start(String test, String release, WorkerSpec prefill) {
    return RouterDeployment.podLocal("sglang-" + test + "-" + release, release, RouterKind.SGLANG_ROUTER, prefill, decode());
  }

  static java.util.stream.Stream<Arguments> streamedOrNot() {
    return Tools.perRelease(List.of(false, true));
  }

  @ParameterizedTest(name = "Envoy {0}: curl -s and curl -N, a repeated prompt; probes untouched")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void curlReadsThePrefillsUsage(String release) {
    try (RouterDeployment deployment = start("curl", release, prefill())) {
      List<Usage> expected = RouterFlows.curl(deployment, PROMPT, 12, 1, false, false, true, true);
      RouterFlows.assertRepeatedPrompt(deployment, expected, RouterWire::assertSglang, ROUTER_PROBES);
    }
  }

  @ParameterizedTest(name = "Envoy {0}: OpenAI Python SDK, stream={1}")
  @MethodSource("streamedOrNot")
  void sdkReadsThePrefillsUsage(String release, boolean stream) {
    try (RouterDeployment deployment = start("sdk-" + stream, release, prefill())) {
      RouterFlows.assertEveryExchange(deployment, RouterFlows.sdk(deployment, PROMPT, stream, 2));
    }
  }

  @ParameterizedTest(name = "Envoy {0}: n=3, stream={1}: bootstrap_room arrays")
  @MethodSource("streamedOrNot")
  void severalChoicesShareOnePrefill(String release, boolean stream) {
    try (RouterDeployment deployment = start("n3-" + stream, release, prefill())) {
      List<Usage> expected = RouterFlows.curl(deployment, PROMPT, 5, 3, stream, stream);
      for (RecordedRequest request : deployment.decode.log().completions()) {
        JsonNode body = RouterClients.parseJson(request.bodyUtf8());
        assertThat(body.path("bootstrap_room").isArray()).as(request.bodyUtf8()).isTrue();
        assertThat(body.path("bootstrap_room")).hasSize(3);
      }
      RouterFlows.assertEveryExchange(deployment, expected);
    }
  }

  @ParameterizedTest(name = "Envoy {0}: the prefill answers 400 ms after the decode, stream={1}")
  @MethodSource("streamedOrNot")
  void theDecodeWaitsForALatePrefill(String release, boolean stream) {
    Duration delay = Duration.ofMillis(400);
    try (RouterDeployment deployment = start("late-" + stream, release, prefill().withPrefillDelay(delay))) {
      RouterFlows.assertEveryExchange(deployment, RouterFlows.curl(deployment, PROMPT, 6, 1, stream, stream));
      assertThat(new GenerationLedger(deployment).completions())
          .as("each generation reply was held until the late context usage arrived")
          .allSatisfy(line -> assertThat(line.durationMillis()).isGreaterThanOrEqualTo(delay.toMillis()));
    }
  }

  @ParameterizedTest(name = "Envoy {0}: 16 concurrent flows, each with its own true usage")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void concurrentFlowsAreNeverCrossMatched(String release) throws Exception {
    int flows = 16;
    ExecutorService clients = Executors.newFixedThreadPool(flows);
    try (RouterDeployment deployment = start("concurrent", release, prefill())) {
      TrueUsage truth = new TrueUsage();
      List<String> prompts = IntStream.range(0, flows).mapToObj(SglangRouterTest::distinctPrompt).toList();
      List<Usage> expected = new ArrayList<>();
      for (int i = 0; i < flows; i++) { // first sight of each prompt: fills the prefill's cache
        expected.add(truth.next(prompts.get(i), maxTokens(i), 1));
        String body = RouterClients.curl(deployment, RouterClients.chat(Wire.MODEL, prompts.get(i), maxTokens(i), 1, false), false);
        assertThat(RouterClients.read(RouterClients.usage(body, false))).isEqualTo(expected.get(i));
      }
      List<Usage> repeated = new ArrayList<>();
      List<CompletableFuture<Usage>> read = new ArrayList<>();
      for (int i = 0; i < flows; i++) {
        repeated.add(truth.next(prompts.get(i), maxTokens(i), 1));
        int flow = i;
        boolean stream = i % 2 == 1;
        read.add(CompletableFuture.supplyAsync(() -> RouterClients.read(RouterClients.usage(RouterClients.curl(
            deployment, RouterClients.chat(Wire.MODEL, prompts.get(flow), maxTokens(flow), 1, stream), stream), stream)), clients));
      }
      assertThat(repeated.stream().map(Usage::cached).distinct()).as("every flow's truth is its own").hasSize(flows);
      for (int i = 0; i < flows; i++) {
        assertThat(read.get(i).get()).as("flow " + i).isEqualTo(repeated.get(i));
      }
      expected.addAll(repeated);
      GenerationLedger ledger = new GenerationLedger(deployment);
      ledger.awaitCompletions(expected.size());
      assertThat(ledger.completions().stream().map(GenerationLedger::metadata).toList())
          .as("the access log holds each flow's own truth once")
          .containsExactlyInAnyOrderElementsOf(expected);
      assertThat(ServiceMetrics.exchanges(deployment.service, "generation")).containsEntry("rewritten", (long) expected.size());
    } finally {
      clients.shutdownNow();
    }
  }

  /** Prompt {@code i}: its own first word and 16 tokens more than prompt {@code i-1}. */
  static String distinctPrompt(int i) {
    return "Flow" + i + " " + String.join(" ", java.util.Collections.nCopies(18 + 16 * i, "tokens"));
  }

  static int maxTokens(int flow) {
    return 1 + flow;
  }
}
