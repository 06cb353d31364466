package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.AccessLogLine;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.e2e.Orchestrator.Answer;
import io.disaggusage.e2e.VllmFlow.Outcome;
import io.disaggusage.extproc.testkit.FreePorts;
import io.disaggusage.extproc.testkit.ScenarioVectors;
import io.disaggusage.extproc.testkit.ScenarioVectors.Vector;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The shipped Istio EnvoyFilters (istio/) as istiod programs them into real Envoys: one istiod
 * ({@link IstiodProcess}, the pinned build, no Kubernetes) watching a config folder, the orchestrator pod's
 * sidecar and the gateway {@code llm-gateway} as Envoy 1.40 over ADS ({@link IstioProxy}), the service on
 * 127.0.0.1:9002 (where sidecar-outbound.yaml's cluster points) classifying by Istio's outbound cluster names as
 * istio/README.md tells an operator to configure it. Each case puts the shipped files it tests into the watched
 * folder, waits until both Envoys run what istiod generated from them, and sends, through the proxy, a vLLM P/D
 * flow under a fixed client {@code x-request-id}, the same flow without any body marker (phase from the cluster
 * name alone), a TensorRT-LLM flow, an SGLang flow (identical bodies, told apart by cluster) and a vLLM 0.32
 * NIXL flow behind the toy proxy (joined by the {@code remote_request_id} it relays, whatever ids the legs carry).
 * It checks what the client reads, the access log's {@code disagg_usage} metadata, the service's exchange counter,
 * and that neither Envoy refused any configuration nor istiod saw a NACK.
 *
 * <p>What standalone mode forces, beside the shipped files ({@link IstioStandalone}): ServiceEntries for the
 * three Services; a Sidecar binding the orchestrator's outbound listeners to 127.0.0.3 (no iptables); a classic
 * Gateway and VirtualServices for the Gateway API Gateway and HTTPRoutes, the gateway proxy labelled
 * {@code gateway.networking.k8s.io/gateway-name: llm-gateway} as Istio labels a Gateway API gateway's pods, so
 * the shipped {@code targetRefs} select it; the mesh without automatic mTLS (no pilot-agent, no certificates).
 */
class IstioLiveTest {
  private static final String SIDECAR_OUTBOUND = "sidecar-outbound.yaml";
  private static final String CENTRAL_SERVICE = "central-service.yaml";
  private static final String GATEWAY = "gateway.yaml";
  private static final String GATEWAY_REQUEST_ID = "gateway-request-id.yaml";
  private static final List<String> SHIPPED = List.of(SIDECAR_OUTBOUND, CENTRAL_SERVICE, GATEWAY, GATEWAY_REQUEST_ID);
  private static final String CENTRAL_CLUSTER = "outbound|9002||" + IstioStandalone.SERVICE_HOST;
  private static final String SIDECAR_CLUSTER = "disagg_usage_extproc";
  private static final String SIDECAR_LISTENER = IstioStandalone.SIDECAR_BIND + "_" + IstioStandalone.WORKER_PORT;
  /** A client that always sends the same id (an SDK default, a replayed request). */
  private static final String CLIENT_REQUEST_ID = "client-fixed-request-id-7f3a";
  private static final Vector TRT_LLM = vector("trtContextFirstStream");
  private static final Vector SGLANG = vector("sglangPrefillFinishingFirst");
  /** One pair of simulated vLLM 0.32 workers for every case: a later case's prefill finds the prompt cached. */
  private static final KvRelayFlow KV_RELAY = new KvRelayFlow();
  private static final String REWRITTEN = "rewritten";
  private static final String NO_CONTEXT = "passthrough_no_context";

  private static Worker context;
  private static Worker generation;
  private static ServiceProcess service;
  private static IstiodProcess istiod;
  private static IstioProxy sidecar;
  private static IstioProxy gateway;
  private static int gatewayPort;

  @BeforeAll
  static void start() {
    int port = IstioStandalone.GRPC_PORT;
    if (FreePorts.accepts(port)) {
      throw new AssertionError("127.0.0.1:" + port + " is taken, and istio/sidecar-outbound.yaml's cluster points there:"
          + " stop what listens on it before running " + IstioLiveTest.class.getSimpleName());
    }
    // 127.0.0.1 only, as sidecar-outbound.yaml has it next to the orchestrator: the sidecar's outbound listener for
    // the central Service's port binds 127.0.0.3:9002, which a service on every interface would hold
    service = ServiceProcess.createOnPort("istio-service", port, "--set", "grpc.listen=127.0.0.1",
        "--set", "classification.context_clusters=" + IstioStandalone.CONTEXT_CLUSTER,
        "--set", "classification.generation_clusters=" + IstioStandalone.GENERATION_CLUSTER);
    service.start();
    service.awaitReady(Duration.ofSeconds(30));
    context = new Worker("istio-context-workers");
    generation = new Worker("istio-generation-workers");
    gatewayPort = FreePorts.next();
    Map<String, String> files = new LinkedHashMap<>();
    files.put("standalone-services.yaml", IstioStandalone.services(context.port(), generation.port()));
    files.put("standalone-sidecar.yaml", IstioStandalone.sidecar());
    files.put("standalone-gateway.yaml", IstioStandalone.gateway(gatewayPort));
    istiod = IstiodProcess.start("istiod", files, IstioStandalone.meshConfig());
    sidecar = IstioProxy.start(IstioProxy.Kind.SIDECAR, "disagg-router-0", IstioStandalone.NAMESPACE, "127.0.0.10",
        IstioStandalone.ORCHESTRATOR_LABELS, istiod);
    gateway = IstioProxy.start(IstioProxy.Kind.GATEWAY, "llm-gateway-istio-0", IstioStandalone.NAMESPACE, "127.0.0.20",
        IstioStandalone.GATEWAY_LABELS, istiod);
  }

  @AfterAll
  static void stop() {
    for (AutoCloseable c : new AutoCloseable[] {gateway, sidecar, istiod, service, context, generation}) {
      if (c != null) {
        try {
          c.close();
        } catch (Exception e) {
          // the next one is closed all the same
        }
      }
    }
  }

  @Test
  void sidecarOutboundCorrectsEveryFlowInTheOrchestratorsSidecar() {
    apply(SIDECAR_OUTBOUND);
    awaitProgrammed(sidecar, Map.of(SIDECAR_LISTENER, SIDECAR_CLUSTER), null);
    runFlows(sidecar, sidecarListener(), true);
  }

  @Test
  void centralServiceCorrectsEveryFlowThroughIstiosOutboundCluster() {
    apply(CENTRAL_SERVICE);
    awaitProgrammed(sidecar, Map.of(SIDECAR_LISTENER, CENTRAL_CLUSTER), null);
    runFlows(sidecar, sidecarListener(), true);
  }

  @Test
  void gatewayWithTheRequestIdFixCorrectsEveryFlow() {
    apply(GATEWAY, GATEWAY_REQUEST_ID);
    awaitProgrammed(gateway, Map.of(gatewayListener(), CENTRAL_CLUSTER), true);
    runFlows(gateway, "http://127.0.0.1:" + gatewayPort, true);
  }

  /**
   * gateway.yaml alone: Istio's gateway connection manager runs with {@code use_remote_address: true} and
   * without {@code preserve_external_request_id}, so each leg gets an id of the gateway's own. vLLM legs of
   * releases before 0.32, joined by {@code x-request-id} only, pass through uncorrected; TensorRT-LLM and SGLang
   * legs join by body ids, and vLLM 0.32 NIXL legs by the {@code remote_request_id} their proxy relays.
   */
  @Test
  void gatewayWithoutTheRequestIdFixLosesOnlyTheFlowsJoinedByRequestId() {
    apply(GATEWAY);
    awaitProgrammed(gateway, Map.of(gatewayListener(), CENTRAL_CLUSTER), false);
    assertThat(gateway.connectionManagers().get(gatewayListener()).path("use_remote_address").asBoolean())
        .as("Istio's gateway connection manager use_remote_address").isTrue();
    runFlows(gateway, "http://127.0.0.1:" + gatewayPort, false);
  }

  /**
   * The manifests switched while vLLM flows with slow decode streams run on a pool of connections: istiod's file
   * watcher picks each edit up, Envoy replaces the listener, and every flow — in flight across an edit or after
   * it — is corrected and accounted, through both clusters in turn. central-service.yaml to sidecar-outbound.yaml
   * in one edit; back in two (istio/README.md): central-service.yaml applied and sidecar-outbound.yaml cut down to
   * its CLUSTER patch, then, once the flows in flight have ended, sidecar-outbound.yaml deleted.
   */
  @Test
  void switchingCentralAndSidecarWhileFlowsRunKeepsEveryFlow() throws Exception {
    apply(CENTRAL_SERVICE);
    awaitProgrammed(sidecar, Map.of(SIDECAR_LISTENER, CENTRAL_CLUSTER), null);
    Snapshot before = Snapshot.take(sidecar);
    VllmFlow flow = new VllmFlow(10, Duration.ofMillis(30)).install(Stack.around(context, generation, null));
    MeshOrchestrator orchestrator = new MeshOrchestrator(sidecarListener());
    AtomicBoolean running = new AtomicBoolean(true);
    AtomicInteger ids = new AtomicInteger();
    List<String> wrong = Collections.synchronizedList(new ArrayList<>());
    ExecutorService clients = Executors.newFixedThreadPool(3);
    List<Future<Integer>> loops = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      loops.add(clients.submit(() -> {
        int flows = 0;
        while (running.get()) {
          String id = "switch-" + ids.incrementAndGet();
          Outcome outcome = flow.judge(orchestrator.vllm(id, true));
          if (outcome != Outcome.CORRECTED) {
            wrong.add(id + " " + outcome);
          }
          flows++;
        }
        return flows;
      }));
    }
    long sidecarStreams;
    long centralStreams;
    try {
      Processes.sleepMillis(600);
      apply(SIDECAR_OUTBOUND);
      awaitProgrammed(sidecar, Map.of(SIDECAR_LISTENER, SIDECAR_CLUSTER), null);
      Processes.sleepMillis(600);
      sidecarStreams = sidecar.requests(SIDECAR_CLUSTER);
      centralStreams = sidecar.requests(CENTRAL_CLUSTER);
      istiod.put(CENTRAL_SERVICE, IstioStandalone.shipped(CENTRAL_SERVICE));
      istiod.put(SIDECAR_OUTBOUND, IstioStandalone.withoutHttpFilters(IstioStandalone.shipped(SIDECAR_OUTBOUND)));
      awaitProgrammed(sidecar, Map.of(SIDECAR_LISTENER, CENTRAL_CLUSTER), null);
      assertThat(sidecar.healthy(SIDECAR_CLUSTER)).as("the sidecar's cluster, kept for the flows in flight").isTrue();
      Processes.sleepMillis(600); // longer than a flow: those in flight at the edit have ended
      apply(CENTRAL_SERVICE);
      Processes.await("the sidecar's cluster gone", Duration.ofSeconds(30), () -> sidecar.requests(SIDECAR_CLUSTER) == 0
          && !Http.body(sidecar.envoy().adminUrl("/clusters")).contains(SIDECAR_CLUSTER + "::"));
      Processes.sleepMillis(600);
    } finally {
      running.set(false);
      clients.shutdown();
    }
    int flows = 0;
    for (Future<Integer> loop : loops) {
      flows += loop.get();
    }
    assertThat(wrong).as("flows not corrected of " + flows).isEmpty();
    assertThat(sidecarStreams).as("ext_proc streams to the sidecar's own cluster after the first edit").isPositive();
    assertThat(sidecar.requests(CENTRAL_CLUSTER)).as("ext_proc streams to the central Service after the second edit")
        .isGreaterThan(centralStreams);
    before.assertAccounted(sidecar, Collections.nCopies(flows, REWRITTEN), null);
  }

  /**
   * Why the switch back takes two edits: deleting sidecar-outbound.yaml at once removes its cluster while ext_proc
   * streams run on it. Envoy resets them (gRPC status 13), and the filter fails open: the flow in flight reaches
   * the client unchanged, with the worker's usage, uncounted. The next flow is corrected through the central
   * Service.
   */
  @Test
  void deletingTheSidecarClusterUnderAFlowLetsThatFlowThroughUncorrected() {
    apply(SIDECAR_OUTBOUND);
    awaitProgrammed(sidecar, Map.of(SIDECAR_LISTENER, SIDECAR_CLUSTER), null);
    long failedOpen = failures(sidecar);
    VllmFlow slow = new VllmFlow(40, Duration.ofMillis(50)).install(Stack.around(context, generation, null));
    MeshOrchestrator orchestrator = new MeshOrchestrator(sidecarListener());
    int received = generation.received().size();
    java.util.concurrent.CompletableFuture<Answer> inFlight =
        java.util.concurrent.CompletableFuture.supplyAsync(() -> orchestrator.vllm("in-flight-at-the-edit", true));
    Processes.await("the decode leg under way", Duration.ofSeconds(10), () -> generation.received().size() > received);
    Processes.sleepMillis(200);
    apply(CENTRAL_SERVICE);
    awaitProgrammed(sidecar, Map.of(SIDECAR_LISTENER, CENTRAL_CLUSTER), null);
    assertThat(slow.judge(inFlight.join())).as("the flow whose ext_proc stream ran on the deleted cluster")
        .isEqualTo(Outcome.UNCHANGED);
    assertThat(failures(sidecar)).as("Envoy's ext_proc fail-open counters").isGreaterThan(failedOpen);
    VllmFlow quick = new VllmFlow(4, Duration.ofMillis(2)).install(Stack.around(context, generation, null));
    assertThat(quick.judge(new MeshOrchestrator(sidecarListener()).vllm("after-the-edit", true))).isEqualTo(Outcome.CORRECTED);
    assertConfigurationTaken();
  }

  // ---- one case's flows and checks ------------------------------------------------------------

  /**
   * The five flows through {@code proxy}'s listener at {@code url}, one after the other; {@code joinsByRequestId}:
   * whether the proxy keeps the client's {@code x-request-id}, so that vLLM legs of releases before 0.32 (the
   * first two flows: no {@code remote_request_id}) join. The fifth, vLLM 0.32 behind its toy proxy, joins
   * either way.
   */
  private static void runFlows(IstioProxy proxy, String url, boolean joinsByRequestId) {
    Snapshot before = Snapshot.take(proxy);
    MeshOrchestrator orchestrator = new MeshOrchestrator(url);
    Stack workers = Stack.around(context, generation, null);
    Outcome vllmOutcome = joinsByRequestId ? Outcome.CORRECTED : Outcome.UNCHANGED;
    String vllmExchange = joinsByRequestId ? REWRITTEN : NO_CONTEXT;

    VllmFlow vllm = new VllmFlow(4, Duration.ofMillis(2)).install(workers);
    assertThat(vllm.judge(orchestrator.vllm(CLIENT_REQUEST_ID, true))).as("vLLM flow (kv_transfer_params)").isEqualTo(vllmOutcome);
    assertThat(vllm.judge(orchestrator.vllm(CLIENT_REQUEST_ID, false))).as("vLLM flow without body markers: phase by cluster")
        .isEqualTo(vllmOutcome);
    for (Vector v : List.of(TRT_LLM, SGLANG)) {
      VectorFlow.serve(workers, workers, List.of(v));
      Answer answer = orchestrator.run(v).generation();
      assertThat(answer.status()).as(v.name()).isEqualTo(200);
      assertThat(answer.text()).as(v + ": the generation bytes the orchestrator received")
          .isEqualTo(new String(v.expectedGeneration(), java.nio.charset.StandardCharsets.UTF_8));
    }
    String kvRelayCached = kvRelay(url, joinsByRequestId);
    String vllmCached = joinsByRequestId ? Long.toString(VllmWorkers.CACHED) : null;
    List<String> cached = new ArrayList<>(java.util.Arrays.asList(vllmCached, vllmCached,
        Long.toString(TRT_LLM.usage().cached()), Long.toString(SGLANG.usage().cached()), kvRelayCached));
    before.assertAccounted(proxy, List.of(vllmExchange, vllmExchange, REWRITTEN, REWRITTEN, REWRITTEN), cached);
  }

  /**
   * A vLLM 0.32 NIXL flow behind its toy proxy, addressed by Host to the worker Services through the listener at
   * {@code url}: the client reads the corrected usage, the decode request relays the prefill's
   * {@code remote_request_id}, and the legs carry the proxy's id ({@code joinsByRequestId}) or two ids of the
   * gateway's own. The cached count the client read.
   */
  private static String kvRelay(String url, boolean joinsByRequestId) {
    KV_RELAY.install(context, generation);
    try (ProxyOrchestrator proxy = new ProxyOrchestrator(path -> url + path, Map.of("host", IstioStandalone.CONTEXT_HOST),
        path -> url + path, Map.of("host", IstioStandalone.GENERATION_HOST))) {
      KvRelayFlow.Result result = KV_RELAY.send(proxy);
      com.fasterxml.jackson.databind.JsonNode read = result.assertCorrected();
      result.assertRelayedTheHandle();
      List<String> ids = List.of(result.prefill().requestId(), result.decode().requestId());
      String sent = proxy.requestIds().get(0);
      if (joinsByRequestId) {
        assertThat(ids).as("the proxy's x-request-id on both legs").containsOnly(sent);
      } else {
        assertThat(ids).as("the gateway's own x-request-id on each leg").doesNotContain(sent).doesNotHaveDuplicates();
      }
      return read.at(KvRelayFlow.CACHED).asText();
    }
  }

  /**
   * What a case starts from: the service's generation exchanges by outcome, the proxy's access log length, and
   * Envoy's ext_proc fail-open counters.
   */
  private record Snapshot(Map<String, Long> exchanges, int logged, long failedOpen) {
    static Snapshot take(IstioProxy proxy) {
      return new Snapshot(ServiceMetrics.exchanges(service, "generation"), generationLines(proxy).size(), failures(proxy));
    }

    /**
     * The generation exchanges since this snapshot ended with {@code outcomes}, in that order in the access log
     * (with {@code cachedTokens} where not null) and as the service counted them; Envoy failed nothing open and
     * refused no configuration, istiod saw every push acknowledged.
     */
    void assertAccounted(IstioProxy proxy, List<String> outcomes, List<String> cachedTokens) {
      Processes.await(outcomes.size() + " generation access log lines", Duration.ofSeconds(10),
          () -> generationLines(proxy).size() >= logged + outcomes.size());
      List<AccessLogLine> lines = generationLines(proxy).subList(logged, generationLines(proxy).size());
      assertThat(lines.stream().map(l -> l.field("usage_outcome")).toList()).as("access log usage_outcome: " + lines)
          .isEqualTo(outcomes);
      for (int i = 0; cachedTokens != null && i < lines.size(); i++) {
        if (cachedTokens.get(i) != null) {
          assertThat(lines.get(i).field("cached_tokens")).as(lines.get(i).toString()).isEqualTo(cachedTokens.get(i));
        }
      }
      Map<String, Long> moved = new java.util.TreeMap<>();
      ServiceMetrics.exchanges(service, "generation").forEach((outcome, count) -> {
        long delta = count - exchanges.getOrDefault(outcome, 0L);
        if (delta != 0) {
          moved.put(outcome, delta);
        }
      });
      Map<String, Long> expected = new java.util.TreeMap<>();
      outcomes.forEach(o -> expected.merge(o, 1L, Long::sum));
      assertThat(moved).as("disagg_usage_exchanges_total{phase=generation} moved").isEqualTo(expected);
      assertThat(failures(proxy)).as("Envoy's ext_proc fail-open counters").isEqualTo(failedOpen);
      assertConfigurationTaken();
    }
  }

  /** Neither Envoy rejected an update, istiod counts no reject, and every push is acknowledged. */
  private static void assertConfigurationTaken() {
    assertThat(sidecar.rejectedUpdates()).as("the sidecar's update_rejected counters").isEmpty();
    assertThat(gateway.rejectedUpdates()).as("the gateway's update_rejected counters").isEmpty();
    assertThat(istiod.rejects()).as("istiod's pilot_total_xds_rejects").isZero();
    assertThat(istiod.unacknowledged()).as("istiod's /debug/syncz").isEmpty();
  }

  private static List<AccessLogLine> generationLines(IstioProxy proxy) {
    return proxy.envoy().accessLog(IstioStandalone.GENERATION_CLUSTER);
  }

  /** The sum of Envoy's ext_proc counters that count a failure let through or a reply discarded. */
  private static long failures(IstioProxy proxy) {
    return proxy.envoy().stats("").entrySet().stream()
        .filter(e -> e.getKey().contains(".ext_proc.")
            && EnvoyCounters.FAILURES.contains(e.getKey().substring(e.getKey().lastIndexOf('.') + 1)))
        .mapToLong(Map.Entry::getValue).sum();
  }

  // ---- the watched folder -------------------------------------------------------------------------

  /** Exactly {@code files} of the shipped ones in istiod's folder, as an operator would have applied them. */
  private static void apply(String... files) {
    List<String> wanted = List.of(files);
    for (String file : SHIPPED) {
      if (wanted.contains(file)) {
        istiod.put(file, IstioStandalone.shipped(file));
      } else {
        istiod.remove(file);
      }
    }
  }

  /**
   * Waits until {@code proxy} runs the service's filter exactly on the listeners {@code extProcClusters} names,
   * each calling its cluster, that cluster's host is healthy, the listener keeps external request ids as
   * {@code preservesRequestId} says (null: not checked), and istiod has every push acknowledged.
   */
  private static void awaitProgrammed(IstioProxy proxy, Map<String, String> extProcClusters, Boolean preservesRequestId) {
    Processes.await(proxy.id() + " running " + extProcClusters, Duration.ofSeconds(30), () -> {
      if (!proxy.extProcClusters().equals(extProcClusters)
          || !extProcClusters.values().stream().allMatch(proxy::healthy)) {
        return false;
      }
      if (preservesRequestId != null) {
        for (String listener : extProcClusters.keySet()) {
          boolean preserves = proxy.connectionManagers().get(listener).path("preserve_external_request_id").asBoolean(false);
          if (preserves != preservesRequestId) {
            return false;
          }
        }
      }
      return istiod.unacknowledged().isEmpty();
    });
  }

  private static String sidecarListener() {
    return "http://" + IstioStandalone.SIDECAR_BIND + ":" + IstioStandalone.WORKER_PORT;
  }

  private static String gatewayListener() {
    return "127.0.0.1_" + gatewayPort;
  }

  private static Vector vector(String name) {
    return java.util.stream.Stream.concat(ScenarioVectors.all().stream(), ScenarioVectors.variants().stream())
        .filter(v -> v.name().equals(name)).findFirst()
        .orElseThrow(() -> new IllegalStateException("no scenario vector " + name));
  }
}
