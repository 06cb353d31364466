package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.e2e.RouterWire.Legs;
import io.disaggusage.e2e.TrueUsage.Usage;
import io.disaggusage.extproc.testkit.Wire;
import io.disaggusage.extproc.emulator.engines.UsageVariant;
import io.disaggusage.extproc.emulator.workers.EngineKind;
import io.disaggusage.extproc.emulator.workers.WorkerRole;
import io.disaggusage.extproc.emulator.workers.WorkerSpec;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * vllm-router 0.1.17 ({@code --vllm-pd-disaggregation}) in front of a vLLM prefill and decode worker,
 * through one real Envoy on the shipped envoy.yaml and the shipped jar (topology 1). The router merges
 * usage itself (prompt and details from the prefill, completion from the decode, total recomputed), so
 * the client's body is right with or without the service: the test runs the same requests through a
 * second router wired straight to its own workers and requires the same bytes, apart from the ids the
 * router generates. The service adds the decode leg's metadata and metrics, which are asserted too.
 */
class VllmRouterTest {
  static final String PROMPT = SglangRouterTest.PROMPT;
  /** vllm-router's start-up calls on each worker: /health (twice) and /metrics (engine count). */
  static final List<String> ROUTER_PROBES = List.of("/health", "/metrics");

  static Stream<Arguments> decodeVariants() {
    return Tools.perRelease(List.of(UsageVariant.BUG, UsageVariant.WHOLE_PROMPT_BUG, UsageVariant.FIXED));
  }

  static Stream<Arguments> streamedOrNot() {
    return Tools.perRelease(List.of(false, true));
  }

  static WorkerSpec prefill() {
    return WorkerSpec.of(EngineKind.VLLM, WorkerRole.PREFILL, "127.0.0.1", 0).withModel(Wire.MODEL);
  }

  static WorkerSpec decode(UsageVariant variant) {
    return WorkerSpec.of(EngineKind.VLLM, WorkerRole.DECODE, "127.0.0.1", 0).withModel(Wire.MODEL).withVariant(variant);
  }

  @ParameterizedTest(name = "Envoy {0}: decode worker {1}: curl -s and -N, with the service and without")
  @MethodSource("decodeVariants")
  void ourCorrectionAndTheRoutersMergeGiveTheClientTheSameBytes(String release, UsageVariant variant) {
    String name = "vllm-" + variant.label() + "-" + release;
    try (RouterDeployment withService = RouterDeployment.central(name, release, RouterKind.VLLM_ROUTER, prefill(), decode(variant));
        RouterDeployment routerAlone = RouterDeployment.direct(name + "-alone", RouterKind.VLLM_ROUTER, prefill(), decode(variant))) {
      TrueUsage truth = new TrueUsage();
      List<Usage> expected = new ArrayList<>();
      for (boolean stream : new boolean[] {false, false, true, true}) {
        Usage want = truth.next(PROMPT, 12, 1);
        expected.add(want);
        String request = RouterClients.chat(Wire.MODEL, PROMPT, 12, 1, stream);
        String corrected = RouterClients.curl(withService, request, stream);
        String merged = RouterClients.curl(routerAlone, request, stream);
        assertThat(RouterClients.read(RouterClients.usage(corrected, stream))).as("with the service").isEqualTo(want);
        assertThat(RouterClients.read(RouterClients.usage(merged, stream))).as("the router alone").isEqualTo(want);
        assertThat(withoutIds(corrected)).as("the same bytes, stream=" + stream).isEqualTo(withoutIds(merged));
      }
      RouterFlows.assertRepeatedPrompt(withService, expected, RouterWire::assertVllm, ROUTER_PROBES);
    }
  }

  @ParameterizedTest(name = "Envoy {0}: OpenAI Python SDK, stream={1}")
  @MethodSource("streamedOrNot")
  void sdkReadsThePrefillsUsage(String release, boolean stream) {
    try (RouterDeployment deployment = RouterDeployment.central(
        "vllm-sdk-" + stream + "-" + release, release, RouterKind.VLLM_ROUTER, prefill(), decode(UsageVariant.BUG))) {
      RouterFlows.assertEveryExchange(deployment, RouterFlows.sdk(deployment, PROMPT, stream, 2));
    }
  }

  /**
   * Clients that all send one fixed {@code X-Request-Id}, as an SDK with a default header does.
   * vllm-router drops it: both legs of each flow carry the router's own
   * {@code ___prefill_addr_…___decode_addr_…_<uuid>} and nothing of the client's, so the service's key
   * (that id) is each flow's own, and both legs have the fingerprint of their client's body.
   */
  @ParameterizedTest(name = "Envoy {0}: 16 concurrent flows, one fixed X-Request-Id, each with its own true usage")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void flowsSharingOneClientRequestIdEachGetTheirOwnUsage(String release) throws Exception {
    try (RouterDeployment deployment = RouterDeployment.central("vllm-fixed-id-" + release, release, RouterKind.VLLM_ROUTER,
        prefill(), decode(UsageVariant.BUG), ServiceProcess.EXCHANGE_LINES)) {
      ConcurrentFlows.Sent sent = RouterFlows.concurrent(deployment, Map.of("x-request-id", ConcurrentFlows.FIXED_REQUEST_ID));
      List<Legs> legs = RouterWire.legs(deployment.prefill, deployment.decode, RouterWire::requestIds);
      assertThat(legs).hasSize(sent.bodies().size()).allSatisfy(flow -> assertThat(flow.requestIds()).singleElement()
          .satisfies(id -> assertThat(id).startsWith("___prefill_addr_").doesNotContain(ConcurrentFlows.FIXED_REQUEST_ID)));
      List<String> ids = legs.stream().map(flow -> flow.requestIds().get(0)).toList();
      assertThat(ids).as("the router's id is each flow's own").doesNotHaveDuplicates();
      RouterWire.assertLegsShareTheirClientsFingerprint(legs, sent.bodies());
      deployment.service.assertKeys("xrid", ids);
    }
  }

  /** The body with the response ids (the router names each request with a fresh uuid) blanked. */
  static String withoutIds(String body) {
    return body.replaceAll("\"id\":\"[^\"]*\"", "\"id\":\"\"");
  }
}
