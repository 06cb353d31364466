package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.AccessLogLine;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.disaggusage.e2e.LlmdDeployment.PrefillPod;
import io.disaggusage.e2e.RouterWire.Legs;
import io.disaggusage.e2e.TrueUsage.Usage;
import io.disaggusage.extproc.testkit.Wire;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.IntFunction;
import java.util.regex.Pattern;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * llm-d's pd-sidecar v0.7.1 ({@code --kv-connector=nixlv2 --secure-proxy=false}) in the pod-local
 * topology we ship ({@link LlmdDeployment}): the client, standing in for llm-d's gateway and EPP, names
 * a prefill pod in {@code x-prefiller-host-port}; pd-sidecar runs that pod's vLLM prefill through the
 * pod's Envoy, then the decode through the decode pod's Envoy on localhost. The decode worker reports
 * {@code prompt_tokens - 1} cached (NIXL bug) and pd-sidecar merges no usage, so every correct count the
 * client reads is the service's rewrite. For every exchange: the client's usage is the prefill worker's
 * truth, the decode Envoy's access log has it as {@code rewritten} metadata, and the service counts it.
 */
class LlmdSidecarTest {
  /** 25 tokens: a repeat reuses one 16-token block. */
  static final String PROMPT = SglangRouterTest.PROMPT;

  static java.util.stream.Stream<Arguments> streamedOrNot() {
    return Tools.perRelease(List.of(false, true));
  }

  static Map<String, String> to(PrefillPod pod) {
    return Map.of(LlmdClients.PREFILLER, pod.hostPort());
  }

  @ParameterizedTest(name = "Envoy {0}: curl -s and curl -N, a repeated prompt; the wire; discovery untouched")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void curlReadsThePrefillsUsage(String release) {
    try (LlmdDeployment deployment = LlmdDeployment.start("llmd-curl-" + release, release, 1)) {
      PrefillPod pod = deployment.prefills.get(0);
      TrueUsage truth = new TrueUsage();
      List<Usage> expected = new ArrayList<>();
      List<String> bodies = new ArrayList<>();
      for (boolean stream : new boolean[] {false, false, true, true}) {
        expected.add(truth.next(PROMPT, 12, 1));
        bodies.add(RouterClients.chat(Wire.MODEL, PROMPT, 12, 1, stream));
        assertThat(read(deployment, bodies.get(bodies.size() - 1), stream, to(pod))).as("stream=" + stream)
            .isEqualTo(expected.get(expected.size() - 1));
      }
      assertThat(expected.get(1).cached()).as("the repeated prompt hits the prefill's cache").isPositive();
      assertEveryExchange(deployment, expected);
      List<Legs> legs = LlmdWire.legs(pod.worker(), deployment.decode);
      assertThat(legs).hasSize(bodies.size());
      for (int i = 0; i < legs.size(); i++) {
        LlmdWire.assertNixlV2(legs.get(i), bodies.get(i));
        assertThat(legs.get(i).requestIds()).as("pd-sidecar's uuid").singleElement()
            .satisfies(id -> assertThat(id).matches(LlmdWire.UUID_V1));
      }
      assertDiscoveryUntouched(deployment, expected.size());
    }
  }

  @ParameterizedTest(name = "Envoy {0}: OpenAI Python SDK, stream={1}")
  @MethodSource("streamedOrNot")
  void sdkReadsThePrefillsUsage(String release, boolean stream) {
    try (LlmdDeployment deployment = LlmdDeployment.start("llmd-sdk-" + stream + "-" + release, release, 1)) {
      TrueUsage truth = new TrueUsage();
      List<Usage> expected = new ArrayList<>();
      for (int i = 0; i < 2; i++) {
        expected.add(truth.next(PROMPT, RouterClients.SDK_MAX_TOKENS, 1));
        JsonNode usage = LlmdClients.sdkChatUsage(deployment, PROMPT, stream, to(deployment.prefills.get(0)));
        assertThat(RouterClients.read(usage)).as(usage.toString()).isEqualTo(expected.get(i));
      }
      assertEveryExchange(deployment, expected);
    }
  }

  /**
   * pd-sidecar keeps a client's {@code X-Request-Id} and adds its uuid as a second header line, so a
   * worker straight behind it receives two. Envoy joins the two lines into one comma-separated value
   * ({@code x-request-id} is one of its inline headers), so behind the pod Envoys each worker receives
   * one, {@code <client's>,<uuid>}, on both legs: the service's key is that whole value, unique per
   * exchange even when clients repeat their ids.
   */
  @ParameterizedTest(name = "Envoy {0}: the client's own X-Request-Id: two header lines, joined by Envoy")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void aClientRequestIdIsKeptBesideTheSidecarsUuid(String release) {
    List<String> clientIds = List.of("client-request-1", "client-request-2", "client-request-1");
    try (LlmdDeployment direct = LlmdDeployment.direct("llmd-xrid-direct-" + release)) {
      for (String clientId : clientIds) {
        Map<String, String> headers = Map.of(LlmdClients.PREFILLER, direct.prefills.get(0).hostPort(), "x-request-id", clientId);
        assertThat(LlmdClients.curl(direct, RouterClients.chat(Wire.MODEL, PROMPT, 3, 1, false), false, headers).status()).isEqualTo(200);
      }
      List<Legs> legs = LlmdWire.legs(direct.prefills.get(0).worker(), direct.decode);
      assertThat(legs).hasSize(clientIds.size());
      for (int i = 0; i < legs.size(); i++) {
        LlmdWire.assertNixlV2(legs.get(i), RouterClients.chat(Wire.MODEL, PROMPT, 3, 1, false));
        List<String> ids = legs.get(i).requestIds();
        assertThat(ids).as("two X-Request-Id headers on each worker: the client's, then pd-sidecar's uuid").hasSize(2);
        assertThat(ids.get(0)).isEqualTo(clientIds.get(i));
        assertThat(ids.get(1)).matches(LlmdWire.UUID_V1);
      }
    }
    try (LlmdDeployment deployment = LlmdDeployment.start("llmd-xrid-" + release, release, 1)) {
      PrefillPod pod = deployment.prefills.get(0);
      TrueUsage truth = new TrueUsage();
      List<Usage> expected = new ArrayList<>();
      List<String> bodies = new ArrayList<>();
      for (int i = 0; i < clientIds.size(); i++) {
        boolean stream = i == 1;
        expected.add(truth.next(PROMPT, 7, 1));
        bodies.add(RouterClients.chat(Wire.MODEL, PROMPT, 7, 1, stream));
        Map<String, String> headers = Map.of(LlmdClients.PREFILLER, pod.hostPort(), "x-request-id", clientIds.get(i));
        assertThat(read(deployment, bodies.get(i), stream, headers)).isEqualTo(expected.get(i));
      }
      assertEveryExchange(deployment, expected);
      List<Legs> legs = LlmdWire.legs(pod.worker(), deployment.decode);
      assertThat(legs).hasSize(clientIds.size());
      for (int i = 0; i < legs.size(); i++) {
        int index = i;
        LlmdWire.assertNixlV2(legs.get(i), bodies.get(i));
        assertThat(legs.get(i).requestIds()).as("one header behind Envoy: the client's id and the uuid, joined")
            .singleElement().satisfies(id -> assertThat(id).matches(Pattern.quote(clientIds.get(index)) + "," + LlmdWire.UUID_V1));
      }
    }
  }

  @ParameterizedTest(name = "Envoy {0}: two prefill pods, chosen per request by x-prefiller-host-port")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void eachRequestUsesThePrefillPodItNames(String release) {
    try (LlmdDeployment deployment = LlmdDeployment.start("llmd-pods-" + release, release, 2)) {
      List<TrueUsage> truths = List.of(new TrueUsage(), new TrueUsage());
      int[] podOf = {0, 1, 0, 0, 1};
      List<Usage> expected = new ArrayList<>();
      for (int i = 0; i < podOf.length; i++) {
        boolean stream = i % 2 == 1;
        expected.add(truths.get(podOf[i]).next(PROMPT, 5, 1));
        assertThat(read(deployment, RouterClients.chat(Wire.MODEL, PROMPT, 5, 1, stream), stream,
            to(deployment.prefills.get(podOf[i])))).as("request " + i + " to pod " + podOf[i]).isEqualTo(expected.get(i));
      }
      assertThat(expected.stream().map(Usage::cached).toList())
          .as("each pod's cache is its own: a first sight on pod 1 after pod 0 has seen the prompt")
          .containsExactly(0L, 0L, 16L, 16L, 16L);
      assertEveryExchange(deployment, expected);
      assertThat(deployment.prefills.get(0).worker().log().completions()).hasSize(3);
      assertThat(deployment.prefills.get(1).worker().log().completions()).hasSize(2);
      assertThat(deployment.prefills.get(0).envoy().accessLog()).filteredOn(l -> l.path().startsWith("/v1/chat"))
          .hasSize(3).allSatisfy(l -> assertThat(l.cluster()).isEqualTo(PodLocalBootstrap.Role.PREFILL.cluster));
    }
  }

  @ParameterizedTest(name = "Envoy {0}: 16 concurrent flows over two prefill pods, each with its own true usage")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void concurrentFlowsAreNeverCrossMatched(String release) throws Exception {
    try (LlmdDeployment deployment = LlmdDeployment.start("llmd-concurrent-" + release, release, 2)) {
      concurrent(deployment, flow -> "flow-" + flow);
    }
  }

  /**
   * Clients that all send one fixed {@code X-Request-Id}, as an SDK with a default header does: pd-sidecar
   * keeps it and adds its own uuid, and each pod's Envoy joins the two header lines, so the key the service
   * reads ({@code x-request-id}) is {@code <fixed>,<uuid>}: each flow's own, on both its legs, which also
   * have the fingerprint of their client's body.
   */
  @ParameterizedTest(name = "Envoy {0}: 16 concurrent flows over two prefill pods, one fixed X-Request-Id, each with its own true usage")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void flowsSharingOneClientRequestIdEachGetTheirOwnUsage(String release) throws Exception {
    try (LlmdDeployment deployment = LlmdDeployment.start("llmd-fixed-id-" + release, release, 2, ServiceProcess.EXCHANGE_LINES)) {
      ConcurrentFlows.Sent sent = concurrent(deployment, flow -> ConcurrentFlows.FIXED_REQUEST_ID);
      List<Legs> legs = new ArrayList<>();
      for (PrefillPod pod : deployment.prefills) {
        legs.addAll(LlmdWire.legs(pod.worker(), deployment.decode));
      }
      assertThat(legs).hasSize(sent.bodies().size()).allSatisfy(flow -> assertThat(flow.requestIds())
          .as("one header behind Envoy: the client's id and pd-sidecar's uuid, joined").singleElement()
          .satisfies(id -> assertThat(id).matches(Pattern.quote(ConcurrentFlows.FIXED_REQUEST_ID) + "," + LlmdWire.UUID_V1)));
      List<String> ids = legs.stream().map(flow -> flow.requestIds().get(0)).toList();
      assertThat(ids).as("each flow's own").doesNotHaveDuplicates();
      RouterWire.assertLegsShareTheirClientsFingerprint(legs, sent.bodies());
      deployment.service.assertKeys("xrid", ids);
    }
  }

  /**
   * {@link ConcurrentFlows} over two prefill pods (flow {@code i} to pod {@code i % 2}), each client sending
   * its {@code X-Request-Id}: each reads its own truth, the decode Envoy logs each once, all rewritten.
   */
  static ConcurrentFlows.Sent concurrent(LlmdDeployment deployment, IntFunction<String> clientId) throws Exception {
    List<TrueUsage> truths = List.of(new TrueUsage(), new TrueUsage());
    ConcurrentFlows.Sent sent = ConcurrentFlows.run(flow -> truths.get(flow % 2), flow -> flow % 4 >= 2,
        (flow, body, stream) -> read(deployment, body, stream,
            Map.of(LlmdClients.PREFILLER, deployment.prefills.get(flow % 2).hostPort(), "x-request-id", clientId.apply(flow))),
        () -> "Envoy's ext_proc failures " + deployment.extProcFailures());
    deployment.awaitGenerations(sent.expected().size());
    ConcurrentFlows.assertEachTruthOnce(deployment.decodeCompletions(), deployment.service, sent.expected());
    return sent;
  }

  /**
   * A prefill pod without its engine: its Envoy answers 503 (a context exchange counted
   * {@code not_disaggregated}, non-2xx, with Envoy 1.40.0 and {@code reset} with 1.36.2; never stored).
   * pd-sidecar then sends the client's own bytes to its decoder, with no {@code kv_transfer_params} and no
   * uuid of its own (the decode Envoy generates the {@code X-Request-Id}); vLLM serves that whole on its
   * own cache. No context was stored under that id, so the service passes the decoder's own usage on
   * ({@code passthrough_no_context}, its own counts in the access log), at once — which is right here: the
   * decoder computed the whole prompt.
   */
  @ParameterizedTest(name = "Envoy {0}: the named prefill pod answers 503, stream={1}: pd-sidecar falls back to the decoder")
  @MethodSource("streamedOrNot")
  void aFailedPrefillFallsBackToTheDecoderAlone(String release, boolean stream) {
    try (LlmdDeployment deployment = LlmdDeployment.start("llmd-fallback-" + stream + "-" + release, release, 2)) {
      PrefillPod down = deployment.prefills.get(1);
      down.worker().close();
      TrueUsage decodersOwnCache = new TrueUsage();
      String body = RouterClients.chat(Wire.MODEL, PROMPT, 6, 1, stream);
      List<Usage> expected = new ArrayList<>();
      for (int i = 0; i < 2; i++) {
        expected.add(decodersOwnCache.next(PROMPT, 6, 1));
        assertThat(read(deployment, body, stream, to(down))).as("the decoder's own usage").isEqualTo(expected.get(i));
      }
      assertThat(expected.get(1).cached()).as("the repeat hits the decoder's own cache").isPositive();
      deployment.awaitGenerations(expected.size());
      assertThat(deployment.decode.log().completions()).hasSize(2).allSatisfy(request -> {
        assertThat(request.bodyUtf8()).as("the client's bytes").isEqualTo(body);
        assertThat(request.headerValues("x-request-id")).as("Envoy's, not pd-sidecar's").hasSize(1);
      });
      assertThat(deployment.decodeCompletions()).hasSize(2).allSatisfy(line -> {
        assertThat(line.status()).isEqualTo(200);
        assertThat(line.field("usage_outcome")).isEqualTo("passthrough_no_context");
        assertThat(line.field("reported_cached_tokens")).as("no rewrite: the decoder's own counts")
            .isEqualTo(line.field("cached_tokens"));
        assertThat(line.durationMillis()).as("nothing waits for a context").isLessThan(1000);
      });
      Processes.await("the failed prefills logged", Duration.ofSeconds(5), () -> down.envoy().accessLog().size() >= 2);
      assertThat(down.envoy().accessLog()).hasSize(2).allSatisfy(line -> assertThat(line.status()).isEqualTo(503));
      assertThat(ServiceMetrics.exchanges(deployment.service, "generation"))
          .containsExactlyEntriesOf(Map.of("passthrough_no_context", 2L));
      // Envoy's local 503 on the prefill pod: counted not_disaggregated (non-2xx) with Envoy 1.40.0, reset
      // with 1.36.2; never stored, so nothing could be matched to the decode leg.
      // the second reset may be counted a moment after its client's answer: wait for it, then check
      Processes.await("both failed contexts counted", Duration.ofSeconds(5), () -> ServiceMetrics
          .exchanges(deployment.service, "context").values().stream().mapToLong(Long::longValue).sum() >= 2);
      Map<String, Long> failedContexts = ServiceMetrics.exchanges(deployment.service, "context");
      assertThat(failedContexts.keySet()).isSubsetOf("not_disaggregated", "reset");
      assertThat(failedContexts.values().stream().mapToLong(Long::longValue).sum()).as(failedContexts.toString()).isEqualTo(2);
      assertThat(deployment.prefills.get(0).worker().log().completions()).as("no other pod is tried").isEmpty();
    }
  }

  /** The client's usage from pd-sidecar; the reply must be 200. */
  static Usage read(LlmdDeployment deployment, String body, boolean stream, Map<String, String> headers) {
    LlmdClients.Reply reply = LlmdClients.curl(deployment, body, stream, headers);
    assertThat(reply.status()).as(reply.body()).isEqualTo(200);
    return RouterClients.read(RouterClients.usage(reply.body(), stream));
  }

  /** Every generation exchange's access-log metadata, in order, and the service's counts of both phases. */
  static void assertEveryExchange(LlmdDeployment deployment, List<Usage> expected) {
    deployment.awaitGenerations(expected.size());
    List<AccessLogLine> lines = deployment.decodeCompletions();
    assertThat(lines).hasSize(expected.size());
    for (int i = 0; i < expected.size(); i++) {
      GenerationLedger.assertMetadata(lines.get(i), expected.get(i));
    }
    assertThat(ServiceMetrics.exchanges(deployment.service, "generation"))
        .containsExactlyEntriesOf(Map.of("rewritten", (long) expected.size()));
    assertThat(ServiceMetrics.exchanges(deployment.service, "context"))
        .containsExactlyEntriesOf(Map.of("stored", (long) expected.size()));
    assertThat(deployment.decode.log().completions()).hasSize(expected.size());
  }

  /**
   * pd-sidecar answers {@code GET /health} itself (no worker is asked) and proxies every other path to its
   * decoder: discovery through it crosses the decode Envoy and the service untouched.
   */
  static void assertDiscoveryUntouched(LlmdDeployment deployment, int completions) {
    assertThat(Http.get(deployment.url("/health")).statusCode()).isEqualTo(200);
    assertThat(deployment.decode.log().probeCount("/health")).as("pd-sidecar's /health is its own").isZero();
    for (String path : List.of("/v1/models", "/metrics")) {
      HttpResponse<String> direct = Http.get(deployment.decode.url().resolve(path).toString());
      HttpResponse<String> throughSidecar = Http.get(deployment.url(path));
      assertThat(throughSidecar.statusCode()).as(path).isEqualTo(direct.statusCode());
      assertThat(throughSidecar.body()).as(path).isEqualTo(direct.body());
    }
    Processes.await("the discovery calls in the decode Envoy's access log", Duration.ofSeconds(5),
        () -> deployment.decodeEnvoy.accessLog().size() >= completions + 2);
    assertThat(deployment.decodeEnvoy.accessLog()).filteredOn(l -> !l.path().startsWith("/v1/chat/completions"))
        .as("the discovery calls the decode Envoy passed carry no usage metadata")
        .hasSize(2)
        .allSatisfy(line -> assertThat(line.field("usage_outcome")).isEqualTo("-"));
    assertThat(ServiceMetrics.exchanges(deployment.service, "generation"))
        .as("the service counts no discovery call").containsExactlyEntriesOf(Map.of("rewritten", (long) completions));
  }
}
