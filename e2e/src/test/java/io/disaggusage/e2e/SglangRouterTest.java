package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.disaggusage.e2e.RouterWire.Legs;
import io.disaggusage.e2e.TrueUsage.Usage;
import io.disaggusage.extproc.testkit.Wire;
import io.disaggusage.extproc.emulator.engines.UsageVariant;
import io.disaggusage.extproc.emulator.workers.EngineKind;
import io.disaggusage.extproc.emulator.workers.RecordedRequest;
import io.disaggusage.extproc.emulator.workers.WorkerRole;
import io.disaggusage.extproc.emulator.workers.WorkerSpec;
import java.time.Duration;
import java.util.List;
import java.util.Map;
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

  static RouterDeployment start(String test, String release, WorkerSpec prefill, String... serviceArgs) {
    return RouterDeployment.podLocal("sglang-" + test + "-" + release, release, RouterKind.SGLANG_ROUTER, prefill, decode(), serviceArgs);
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
    try (RouterDeployment deployment = start("concurrent", release, prefill())) {
      RouterFlows.concurrent(deployment, Map.of());
    }
  }

  /**
   * Clients that all send one fixed {@code X-Request-Id}, as an SDK with a default header does.
   * sglang-router passes it on unchanged to both legs of every flow (and the pod Envoys keep it), but the
   * service keys SGLang legs by {@code bootstrap_host} and {@code bootstrap_room}, which the router draws per
   * request: every flow has its own key, and both its legs the fingerprint of its client's body.
   */
  @ParameterizedTest(name = "Envoy {0}: 16 concurrent flows, one fixed X-Request-Id, each with its own true usage")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void flowsSharingOneClientRequestIdEachGetTheirOwnUsage(String release) throws Exception {
    try (RouterDeployment deployment = start("fixed-id", release, prefill(), ServiceProcess.EXCHANGE_LINES)) {
      ConcurrentFlows.Sent sent = RouterFlows.concurrent(deployment, Map.of("x-request-id", ConcurrentFlows.FIXED_REQUEST_ID));
      List<Legs> legs = RouterWire.legs(deployment.prefill, deployment.decode, RouterWire::bootstrapRoom);
      assertThat(legs).hasSize(sent.bodies().size()).allSatisfy(flow -> {
        assertThat(flow.requestIds()).as("the client's id on the prefill leg").containsExactly(ConcurrentFlows.FIXED_REQUEST_ID);
        assertThat(flow.decode().headerValues("x-request-id")).as("and on the decode leg").containsExactly(ConcurrentFlows.FIXED_REQUEST_ID);
      });
      RouterWire.assertLegsShareTheirClientsFingerprint(legs, sent.bodies());
      deployment.service.assertKeys("sgl",
          legs.stream().map(flow -> RouterDeployment.PREFILL_POD + "|" + RouterWire.bootstrapRoom(flow.prefill())).toList());
    }
  }
}
