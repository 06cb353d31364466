package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.AccessLogLine;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.e2e.Orchestrator.Answer;
import io.disaggusage.extproc.testkit.ScenarioVectors;
import io.disaggusage.extproc.testkit.ScenarioVectors.Leg;
import io.disaggusage.extproc.testkit.ScenarioVectors.Vector;
import io.disaggusage.extproc.testkit.Wire;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The shipped Envoy Gateway manifests (deploy/envoy-gateway/) programming a real Envoy through Envoy
 * Gateway's own controller: envoy-gateway v1.9.0 run standalone ({@link EnvoyGatewayProcess}, in a
 * network namespace of the test's own) reads them from a watched folder beside the cluster fixture
 * deploy-validation translates with egctl, and starts Envoy 1.39.0 (its default image's release)
 * through func-e. The only changes are those standalone mode forces, made and named by
 * {@link StandaloneManifests}: Services become Backends, the sidecar's socket moves to a temporary
 * folder; the sidecar EnvoyProxy's Kubernetes patch has no meaning on a host, so the test runs the
 * service that container runs, with its environment. Envoy Gateway starts once; each case makes the
 * watched folder hold its files.
 *
 * <p>Per case: the bytes and usage the orchestrator receives, the generation's access-log line (the
 * shipped access-log.yaml format, with the service's {@code disagg_usage} metadata), the service's
 * {@code disagg_usage_exchanges_total}, that Envoy Gateway accepted every object (the statuses its File
 * provider logs) and that Envoy rejected no configuration ({@code *.update_rejected} 0).
 */
class EnvoyGatewayLiveTest {
  /** The Gateway's listener port in the fixture (llm-gateway, listener http). */
  static final int LISTENER_PORT = 8000;
  /** Envoy Gateway's xDS name of that listener: namespace/gateway/listener (its default name scheme). */
  static final String LISTENER = "llm/llm-gateway/http";
  /** The HTTP connection manager's stat prefix Envoy Gateway gives that listener: http-<port>. */
  static final String STAT_PREFIX = "http-" + LISTENER_PORT;
  /** The HTTPRoute rule to the context workers: it matches this header (the fixture's rule 0). */
  static final Map<String, String> CONTEXT_ROUTE = Map.of("x-disagg-pool", "context");
  /** Envoy Gateway's names for the fixture route's clusters: httproute/<namespace>/<route>/rule/<index>. */
  static final String CONTEXT_CLUSTER = "httproute/llm/disagg-workers/rule/0";
  static final String GENERATION_CLUSTER = "httproute/llm/disagg-workers/rule/1";
  /**
   * The one condition that is not True on a standalone Gateway: the host infrastructure publishes no
   * address for it (on Kubernetes the proxy Service's address), so Programmed is False with this reason.
   */
  static final String NO_ADDRESS_ON_A_HOST = "Programmed status=False reason=AddressNotAssigned";
  static final Duration PROGRAMMED = Duration.ofSeconds(30);
  /** The Backend unix-socket-sidecar.yaml's policy calls. */
  static final String SIDECAR_BACKEND = "disagg-usage-extproc-socket";

  static NetworkNamespace namespace;
  static Worker context;
  static Worker generation;
  static ServiceProcess central;
  static ServiceProcess sidecar;
  static Path socketDir;
  static EnvoyGatewayProcess gateway;
  /** The orchestrator's connections: new ones for each case ({@link #program}). */
  static java.net.http.HttpClient orchestrator = Orchestrator.newClient();

  @BeforeAll
  static void start() throws IOException {
    namespace = NetworkNamespace.create("eg");
    InetAddress host = InetAddress.getByName(namespace.hostAddress());
    context = new Worker("eg-context", host);
    generation = new Worker("eg-generation", host);
    central = ServiceProcess.started("eg-central", serviceSettings());
    socketDir = Files.createTempDirectory("eg-sidecar");
    List<String> sidecarSettings = new ArrayList<>(List.of(serviceSettings()));
    sidecarSettings.addAll(StandaloneManifests.sidecarEnvironment(sidecarProxy(), "disagg-usage-extproc"));
    sidecar = ServiceProcess.started("eg-sidecar", sidecarSettings.toArray(String[]::new));
    gateway = EnvoyGatewayProcess.start("envoy-gateway", namespace, centralCase(true, false, "200ms"));
  }

  @AfterAll
  static void stop() throws IOException {
    for (AutoCloseable c : new AutoCloseable[] {gateway, sidecar, central, context, generation, namespace}) {
      if (c != null) {
        try {
          c.close();
        } catch (Exception e) {
          // the others are still stopped
        }
      }
    }
    if (socketDir != null) {
      try (var files = Files.list(socketDir)) {
        for (Path f : files.toList()) {
          Files.deleteIfExists(f);
        }
      }
      Files.deleteIfExists(socketDir);
    }
  }

  /**
   * The services log one summary line per exchange and classify by Envoy Gateway's route clusters
   * (used once the EnvoyPatchPolicy sends {@code xds.cluster_name}).
   */
  private static String[] serviceSettings() {
    return new String[] {ServiceProcess.EXCHANGE_LINES[0], ServiceProcess.EXCHANGE_LINES[1],
        "--set", "classification.context_clusters=" + CONTEXT_CLUSTER,
        "--set", "classification.generation_clusters=" + GENERATION_CLUSTER};
  }

  // ---- the cases' files ----------------------------------------------------------------------

  /** The sidecar file's objects, the socket moved. */
  static List<ObjectNode> sidecarObjects() {
    return StandaloneManifests.socketMovedTo(
        StandaloneManifests.documents(StandaloneManifests.shipped("unix-socket-sidecar.yaml")), socket());
  }

  static ObjectNode sidecarProxy() {
    return StandaloneManifests.only(sidecarObjects(), "EnvoyProxy");
  }

  /** The fixture with the worker Services as Backends, its GatewayClass referencing {@code envoyProxy}. */
  static String cluster(ObjectNode envoyProxy) {
    List<ObjectNode> docs = StandaloneManifests.servicesBecomeBackends(StandaloneManifests.clusterFixture(),
        namespace.hostAddress(), Map.of("context-workers", context.port(), "generation-workers", generation.port()));
    return StandaloneManifests.yaml(StandaloneManifests.parametersRef(docs, envoyProxy));
  }

  /**
   * The central policy (its Service a Backend) with {@code messageTimeout} as given, the access log,
   * and the request-id fix and the EnvoyPatchPolicy when asked for.
   */
  static Map<String, String> centralCase(boolean requestIdFix, boolean patchPolicy, String messageTimeout) {
    ObjectNode accessLogProxy = StandaloneManifests.only(StandaloneManifests.documents(StandaloneManifests.shipped("access-log.yaml")), "EnvoyProxy");
    // Not a standalone change but the suite's way with every Envoy it reads: the access log written every
    // 20 ms instead of Envoy's 10 s. Envoy Gateway passes the EnvoyProxy's extraArgs when it starts Envoy.
    accessLogProxy.with("spec").putArray("extraArgs").add("--file-flush-interval-msec").add("20");
    String accessLog = StandaloneManifests.yaml(List.of(accessLogProxy));
    List<ObjectNode> policy = StandaloneManifests.servicesBecomeBackends(
        StandaloneManifests.documents(StandaloneManifests.shipped("extension-policy.yaml")),
        namespace.hostAddress(), Map.of(StandaloneManifests.CENTRAL_SERVICE, central.grpcPort()));
    ObjectNode extProc = (ObjectNode) StandaloneManifests.only(policy, "EnvoyExtensionPolicy").at("/spec/extProc/0");
    assertThat(extProc.path("messageTimeout").asText()).as("the shipped messageTimeout").isEqualTo("200ms");
    extProc.put("messageTimeout", messageTimeout);
    Map<String, String> files = new LinkedHashMap<>();
    files.put("cluster.yaml", cluster(accessLogProxy));
    files.put("access-log.yaml", accessLog);
    files.put("extension-policy.yaml", StandaloneManifests.yaml(policy));
    if (requestIdFix) {
      files.put("request-id.yaml", StandaloneManifests.shipped("request-id.yaml"));
    }
    if (patchPolicy) {
      files.put("envoy-patch-policy.yaml", StandaloneManifests.shipped("envoy-patch-policy.yaml"));
    }
    return files;
  }

  /** The Unix-socket sidecar file, its socket moved, its EnvoyProxy the GatewayClass's; the request-id fix. */
  static Map<String, String> sidecarCase() {
    List<ObjectNode> docs = sidecarObjects();
    Map<String, String> files = new LinkedHashMap<>();
    files.put("cluster.yaml", cluster(StandaloneManifests.only(docs, "EnvoyProxy")));
    files.put("unix-socket-sidecar.yaml", StandaloneManifests.yaml(docs));
    files.put("request-id.yaml", StandaloneManifests.shipped("request-id.yaml"));
    return files;
  }

  static Path socket() {
    return socketDir.resolve("extproc.sock");
  }

  // ---- the cases -----------------------------------------------------------------------------

  @Test
  void extensionPolicyWithTheRequestIdFixCorrectsVllmAndTensorRtFlows() {
    program("the central policy with the request-id fix", centralCase(true, false, "200ms"),
        dump -> callsTheCentralService(dump) && hcm(dump).path("preserve_external_request_id").asBoolean(false)
            && !extProc(dump).has("max_message_timeout") && extProc(dump).path("message_timeout").asText().equals("0.200s"));
    assertThat(hcm(gateway.configDump()).path("use_remote_address").asBoolean(false))
        .as("Envoy Gateway's listener treats the orchestrator as an external client").isTrue();

    Vector vllm = vector("vllmProxyJson");
    assertCorrected(central, vllm);
    assertThat(requestIds()).as("the orchestrator's x-request-id reaches both workers")
        .containsExactly(vllm.context().requestHeaders().get("x-request-id"), vllm.generation().requestHeaders().get("x-request-id"));
    assertCorrected(central, vector("llmdSidecarStream"));
    assertCorrected(central, vector("trtContextFirstStream"));
  }

  /**
   * The central policy without request-id.yaml: Envoy replaces the orchestrator's x-request-id on each leg. A vLLM
   * flow joined only by that id passes through with the worker's usage; a vLLM 0.32 NIXL flow, whose proxy relays
   * the prefill's remote_request_id, and a TensorRT-LLM flow (ids in the body) are corrected.
   */
  @Test
  void withoutTheRequestIdFixOnlyVllmFlowsJoinedByTheIdPassThrough() {
    program("the central policy without the request-id fix", centralCase(false, false, "200ms"),
        dump -> callsTheCentralService(dump) && !hcm(dump).path("preserve_external_request_id").asBoolean(false)
            && !extProc(dump).has("max_message_timeout"));

    // vLLM before 0.32 (this vector's shape: no remote_request_id in the legs) joins only by x-request-id
    Vector vllm = vector("vllmProxyJson");
    long passedThrough = central.exchanges("generation", "passthrough_no_context");
    AccessLogLine line = sendAndLog(vllm);
    assertThat(line.field("usage_outcome")).as(line.toString()).isEqualTo("passthrough_no_context");
    assertThat(lastResult.generation().text()).as("the worker's own usage reaches the client")
        .isEqualTo(vllm.generation().responseUtf8());
    String sent = vllm.context().requestHeaders().get("x-request-id");
    assertThat(requestIds()).as("Envoy replaced the orchestrator's x-request-id on each leg").hasSize(2)
        .doesNotContain(sent).doesNotHaveDuplicates();
    Processes.await("passthrough_no_context counted", Duration.ofSeconds(5),
        () -> central.exchanges("generation", "passthrough_no_context") == passedThrough + 1);

    assertKvRelayCorrected();
    assertCorrected(central, vector("trtContextFirstStream"));
  }

  /**
   * vLLM 0.32's NIXL flow behind its toy proxy, through the listener that gives each leg an id of its own: the
   * proxy relays the prefill's {@code kv_transfer_params}, whose {@code remote_request_id} names the id Envoy gave
   * the prefill leg, and the service joins the decode leg by it. Twice: the second prefill finds the prompt's full
   * blocks in its prefix cache, so the corrected count is not zero either.
   */
  private static void assertKvRelayCorrected() {
    KvRelayFlow flow = new KvRelayFlow().install(context, generation);
    try (ProxyOrchestrator proxy = new ProxyOrchestrator(path -> gateway.listenerUrl(LISTENER_PORT, path), CONTEXT_ROUTE,
        path -> gateway.listenerUrl(LISTENER_PORT, path), Map.of())) {
      for (int i = 0; i < 2; i++) {
        long rewritten = central.exchanges("generation", "rewritten");
        EnvoyCounters before = extProcCounters();
        int logged = generationLines().size();
        KvRelayFlow.Result result = flow.send(proxy);
        JsonNode read = result.assertCorrected();
        result.assertRelayedTheHandle();
        String sent = proxy.requestIds().get(i);
        assertThat(List.of(result.prefill().requestId(), result.decode().requestId()))
            .as("Envoy replaced the proxy's x-request-id on each leg").doesNotContain(sent).doesNotHaveDuplicates();
        if (i == 1) {
          assertThat(read.at(KvRelayFlow.CACHED).asLong()).as("the second prefill's prefix-cache hits").isPositive();
        }
        RealFlowCheck.assertMetadata(lineAfter(logged, "the vLLM 0.32 flow"), read, result.reported(), "rewritten",
            Wire.MODEL);
        Processes.await("the vLLM 0.32 flow counted as rewritten", Duration.ofSeconds(5),
            () -> central.exchanges("generation", "rewritten") == rewritten + 1);
        assertAskedAndNothingFailed("the vLLM 0.32 flow", before, false);
      }
    }
  }

  @Test
  void unixSocketSidecarCorrectsVllmAndTensorRtFlows() {
    program("the Unix-socket sidecar", sidecarCase(), dump -> hcm(dump).path("preserve_external_request_id").asBoolean(false)
        && extProc(dump).at("/grpc_service/envoy_grpc/authority").asText().startsWith(SIDECAR_BACKEND + ".")
        && gateway.admin("/clusters").contains(socket().toString()));
    assertCorrected(sidecar, vector("vllmProxyJson"));
    assertCorrected(sidecar, vector("trtContextFirstStream"));
  }

  @Test
  void envoyPatchPolicyReachesTheFilterAndCorrectsGenerationFirstAndSglangFlows() {
    program("the central policy with the EnvoyPatchPolicy", centralCase(true, true, "200ms"),
        dump -> callsTheCentralService(dump) && extProc(dump).path("max_message_timeout").asText().equals("3s"));
    JsonNode filter = extProc(gateway.configDump());
    assertThat(filter.path("request_attributes").toString()).isEqualTo("[\"xds.cluster_name\"]");
    assertThat(filter.path("message_timeout").asText()).isEqualTo("0.200s");

    assertCorrected(central, vector("trtGenerationFirstStream"));
    assertCorrected(central, vector("sglangIdenticalBodiesByCluster"));
    assertCorrected(central, vector("vllmProxyJson"));
  }

  /**
   * The central policy's messageTimeout edited while flows stream (Envoy Gateway's file watcher reads
   * it, Envoy replaces the listener and drains the old one): the flows in flight, and those after it,
   * are all corrected and accounted.
   */
  @Test
  void aManifestEditedWhileFlowsStreamKeepsEveryFlowIntact() {
    program("the central policy with the request-id fix", centralCase(true, false, "200ms"),
        dump -> callsTheCentralService(dump) && extProc(dump).path("message_timeout").asText().equals("0.200s")
            && hcm(dump).path("preserve_external_request_id").asBoolean(false) && !extProc(dump).has("max_message_timeout"));
    VllmFlow flow = new VllmFlow(60, Duration.ofMillis(50)).install(context, generation); // 3 s a stream
    int logged = generationLines().size();
    long rewritten = central.exchanges("generation", "rewritten");
    long listenerUpdates = gateway.stats("listener_manager.lds.update_success").values().iterator().next();
    int flows = 6;

    List<CompletableFuture<Answer>> inFlight = new ArrayList<>();
    for (int i = 0; i < flows; i++) {
      inFlight.add(stream(flow, "eg-edit-before-" + i));
    }
    Processes.await("every stream under way", Duration.ofSeconds(10), () -> generation.received().stream()
        .filter(r -> r.header("x-request-id") != null && r.header("x-request-id").startsWith("eg-edit-before-")).count() == flows);
    gateway.apply(centralCase(true, false, "250ms"));
    Processes.await("the edited messageTimeout in Envoy", PROGRAMMED,
        () -> extProc(gateway.configDump()).path("message_timeout").asText().equals("0.250s"));
    assertThat(inFlight).as("streams still in flight when Envoy took the edit").noneMatch(CompletableFuture::isDone);
    List<CompletableFuture<Answer>> after = new ArrayList<>();
    for (int i = 0; i < flows; i++) {
      after.add(stream(flow, "eg-edit-after-" + i));
    }
    List<CompletableFuture<Answer>> all = new ArrayList<>(inFlight);
    all.addAll(after);
    for (CompletableFuture<Answer> answer : all) {
      assertThat(flow.judge(answer.join())).isEqualTo(VllmFlow.Outcome.CORRECTED);
    }
    Processes.await(2 * flows + " generation access-log lines", Duration.ofSeconds(5),
        () -> generationLines().size() >= logged + 2 * flows);
    assertThat(generationLines().subList(logged, generationLines().size()))
        .hasSize(2 * flows).allSatisfy(l -> assertThat(l.field("usage_outcome")).isEqualTo("rewritten"))
        .allSatisfy(l -> assertThat(l.field("cached_tokens")).isEqualTo(Integer.toString(VllmWorkers.CACHED)));
    Processes.await("the flows counted", Duration.ofSeconds(5),
        () -> central.exchanges("generation", "rewritten") == rewritten + 2 * flows);
    assertThat(gateway.stats("listener_manager.lds.update_success").values().iterator().next())
        .as("Envoy took a new listener").isGreaterThan(listenerUpdates);
    assertAcceptedAndNothingRejected(centralCase(true, false, "250ms"));
  }

  // ---- programming and checking ---------------------------------------------------------------

  /**
   * Makes the watched folder hold {@code files} and waits until Envoy's configuration shows the case
   * ({@code programmed}) and Envoy Gateway reports every object accepted; Envoy rejected nothing.
   */
  static void program(String what, Map<String, String> files, Predicate<JsonNode> programmed) {
    gateway.apply(files);
    // A case's flows start on connections of their own. Envoy replaces the listener on a change and
    // drains the old one, whose connections keep its filter chain for one more request each while the
    // (shared) routes already enable the new case's filter by its name: a request there meets no
    // ext_proc when the change renamed the filter (another policy). deploy/envoy-gateway/README.md says so.
    orchestrator = Orchestrator.newClient();
    try {
      Processes.await(what + " in Envoy's configuration", PROGRAMMED, () -> {
        JsonNode dump = gateway.configDump();
        return programmed.test(dump) && everyRouteEnablesTheListenersExtProc(dump);
      });
    } catch (AssertionError e) {
      throw new AssertionError(e.getMessage() + "\n" + gateway.tail(), e);
    }
    assertAcceptedAndNothingRejected(files);
  }

  static void assertAcceptedAndNothingRejected(Map<String, String> files) {
    List<String> objects = new ArrayList<>();
    for (String yaml : files.values()) {
      for (ObjectNode doc : StandaloneManifests.documents(yaml)) {
        String kind = doc.path("kind").asText();
        if (!kind.equals("Namespace")) {
          // The File provider's status log cannot name the EnvoyProxy kind: it says Unknown.
          objects.add((kind.equals("EnvoyProxy") ? "Unknown" : kind) + "/" + doc.path("metadata").path("namespace").asText()
              + "/" + StandaloneManifests.name(doc));
        }
      }
    }
    try {
      Processes.await("a status for every object", Duration.ofSeconds(10), () -> {
        Map<String, EnvoyGatewayProcess.ObjectStatus> statuses = gateway.statuses();
        return objects.stream().allMatch(o -> statuses.containsKey(o) && notAccepted(statuses.get(o)).isEmpty());
      });
    } catch (AssertionError e) {
      Map<String, EnvoyGatewayProcess.ObjectStatus> statuses = gateway.statuses();
      throw new AssertionError(e.getMessage() + ": " + objects.stream().map(o -> o + " " + (statuses.containsKey(o)
          ? notAccepted(statuses.get(o)) : "no status")).toList(), e);
    }
    assertThat(gateway.rejectedUpdates()).as("Envoy's rejected configuration updates").isNotEmpty()
        .allSatisfy((name, count) -> assertThat(count).as(name).isZero());
  }

  static List<String> notAccepted(EnvoyGatewayProcess.ObjectStatus status) {
    return status.conditions().stream().filter(c -> !c.contains(" status=True "))
        .filter(c -> !(status.kind().equals("Gateway") && c.startsWith(NO_ADDRESS_ON_A_HOST))).toList();
  }

  /** The HTTP connection manager of the Gateway's listener, as Envoy holds it. */
  static JsonNode hcm(JsonNode dump) {
    for (JsonNode listeners : dump.findValues("dynamic_listeners")) {
      for (JsonNode listener : listeners) {
        JsonNode active = listener.at("/active_state/listener");
        if (active.path("name").asText().equals(LISTENER)) {
          List<JsonNode> managers = active.findParents("http_filters");
          return managers.isEmpty() ? com.fasterxml.jackson.databind.node.MissingNode.getInstance() : managers.get(0);
        }
      }
    }
    return com.fasterxml.jackson.databind.node.MissingNode.getInstance();
  }

  /**
   * Whether every route of the Gateway's route configuration enables the ext_proc filter the listener
   * holds. Envoy Gateway lists the filter disabled on the listener and enables it per route, by its
   * name; listener and routes arrive by separate updates, and between them a route can name a filter
   * the listener does not hold yet (a leg then meets no ext_proc at all).
   */
  static boolean everyRouteEnablesTheListenersExtProc(JsonNode dump) {
    String filter = null;
    for (JsonNode f : hcm(dump).path("http_filters")) {
      if (f.path("name").asText().startsWith("envoy.filters.http.ext_proc")) {
        filter = f.path("name").asText();
      }
    }
    int routes = 0;
    for (JsonNode configs : dump.findValues("dynamic_route_configs")) {
      for (JsonNode config : configs) {
        for (JsonNode route : config.at("/route_config/virtual_hosts").findValues("routes")) {
          for (JsonNode r : route) {
            routes++;
            if (filter == null || !r.path("typed_per_filter_config").has(filter)) {
              return false;
            }
          }
        }
      }
    }
    return routes > 0;
  }

  /** Whether the ext_proc filter calls the central Service's Backend (Envoy Gateway sets the authority from the ref). */
  static boolean callsTheCentralService(JsonNode dump) {
    return extProc(dump).at("/grpc_service/envoy_grpc/authority").asText().startsWith(StandaloneManifests.CENTRAL_SERVICE + ".");
  }

  /** The ext_proc filter's config on the listener (whatever Envoy Gateway named it), or a missing node. */
  static JsonNode extProc(JsonNode dump) {
    for (JsonNode filter : hcm(dump).path("http_filters")) {
      if (filter.path("name").asText().startsWith("envoy.filters.http.ext_proc")) {
        return filter.path("typed_config");
      }
    }
    return com.fasterxml.jackson.databind.node.MissingNode.getInstance();
  }

  // ---- flows ---------------------------------------------------------------------------------

  static VectorFlow.Result lastResult;

  static Vector vector(String name) {
    List<Vector> all = ScenarioVectors.all();
    return all.stream().filter(v -> v.name().equals(name)).findFirst().orElseThrow(() -> new AssertionError("no vector " + name));
  }

  /** Both legs of {@code v} through the Gateway's listener, the context leg matching the context rule. */
  static VectorFlow.Result send(Vector v) {
    context.clear();
    generation.clear();
    VectorFlow.serve(context, generation, List.of(v));
    return VectorFlow.send(leg -> post(leg, CONTEXT_ROUTE), leg -> post(leg, Map.of()), v);
  }

  private static CompletableFuture<Answer> post(Leg leg, Map<String, String> route) {
    Map<String, String> headers = new LinkedHashMap<>(leg.requestHeaders());
    headers.putAll(route);
    return Orchestrator.post(orchestrator, gateway.listenerUrl(LISTENER_PORT, leg.path()), headers, leg.requestBody());
  }

  /** A VllmFlow stream under {@code requestId}: the prefill leg, then the decode leg. */
  static CompletableFuture<Answer> stream(VllmFlow flow, String requestId) {
    Map<String, String> id = Map.of("x-request-id", requestId);
    Map<String, String> contextHeaders = new LinkedHashMap<>(id);
    contextHeaders.putAll(CONTEXT_ROUTE);
    return Orchestrator.post(orchestrator, gateway.listenerUrl(LISTENER_PORT, "/v1/chat/completions"), contextHeaders,
            VllmFlow.PREFILL_REQUEST.getBytes(StandardCharsets.UTF_8))
        .thenCompose(prefill -> Orchestrator.post(orchestrator, gateway.listenerUrl(LISTENER_PORT, "/v1/chat/completions"), id,
            VllmFlow.DECODE_REQUEST.getBytes(StandardCharsets.UTF_8)));
  }

  /** Sends {@code v} and returns its generation's access-log line (the result in {@link #lastResult}). */
  static AccessLogLine sendAndLog(Vector v) {
    int logged = generationLines().size();
    lastResult = send(v);
    assertThat(lastResult.generation().status()).as(v + " generation status").isEqualTo(200);
    return lineAfter(logged, v.toString());
  }

  /** The generation access-log line after the first {@code logged} ones, once Envoy wrote it. */
  static AccessLogLine lineAfter(int logged, String flow) {
    Processes.await("the generation access-log line of " + flow, Duration.ofSeconds(5), () -> generationLines().size() > logged);
    return generationLines().get(logged);
  }

  /**
   * {@code v} through the gateway: the orchestrator reads the corrected bytes (so its SDK the corrected
   * usage), the access log carries the corrected figures, the service counted a rewrite, and none of
   * Envoy's ext_proc failure counters moved.
   */
  static void assertCorrected(ServiceProcess service, Vector v) {
    long rewritten = service.exchanges("generation", "rewritten");
    EnvoyCounters before = extProcCounters();
    AccessLogLine line = sendAndLog(v);
    assertThat(lastResult.generation().text()).as(v + ": the bytes the orchestrator receives")
        .isEqualTo(new String(v.expectedGeneration(), StandardCharsets.UTF_8));
    if (v.context() != null) {
      assertThat(lastResult.context().text()).as(v + ": the context leg passes unchanged").isEqualTo(v.context().responseUtf8());
    }
    assertThat(line.field("usage_outcome")).as(line.toString()).isEqualTo("rewritten");
    assertThat(line.field("prompt_tokens")).as(line.toString()).isEqualTo(Long.toString(v.usage().prompt()));
    assertThat(line.field("cached_tokens")).as(line.toString()).isEqualTo(Long.toString(v.usage().cached()));
    assertThat(line.field("completion_tokens")).as(line.toString()).isEqualTo(Long.toString(v.usage().completion()));
    assertThat(line.field("total_tokens")).as(line.toString()).isEqualTo(Long.toString(v.usage().total()));
    Processes.await(v + " counted as rewritten", Duration.ofSeconds(5),
        () -> service.exchanges("generation", "rewritten") == rewritten + 1);
    assertAskedAndNothingFailed(v.toString(), before,
        v.order() == ScenarioVectors.Order.GENERATION_FIRST && v.generation().contentType().startsWith("text/event-stream"));
  }

  /**
   * Since {@code before}, Envoy asked the service and none of its ext_proc failure counters moved; on a
   * {@code generationFirstStream} at most one ignored extension: its stream's end may come with its last event, when
   * no Envoy timer runs (docs/behaviour.md, "Envoy's message timer while the last reply waits").
   */
  static void assertAskedAndNothingFailed(String flow, EnvoyCounters before, boolean generationFirstStream) {
    Map<String, Long> moved = before.movedTo(extProcCounters());
    Map<String, Long> failures = EnvoyCounters.failures(moved);
    if (generationFirstStream) {
      failures.computeIfPresent(STAT_PREFIX + ".override_message_timeout_ignored", (name, n) -> n <= 1 ? null : n);
    }
    assertThat(failures).as(flow + ": Envoy's ext_proc failure counters, all moved: " + moved).isEmpty();
    assertThat(moved).as(flow + ": Envoy asked the service").containsKey(STAT_PREFIX + ".streams_started");
  }

  static List<AccessLogLine> generationLines() {
    return gateway.accessLog().stream().filter(l -> l.cluster().equals(GENERATION_CLUSTER)).toList();
  }

  /** The x-request-id each worker received, context then generation, of the last flow sent. */
  static List<String> requestIds() {
    List<String> ids = new ArrayList<>();
    context.received().forEach(r -> ids.add(r.header("x-request-id")));
    generation.received().forEach(r -> ids.add(r.header("x-request-id")));
    return ids;
  }

  /** Envoy's ext_proc counters on the Gateway's listener, named as {@link EnvoyCounters} names them: prefix.counter. */
  static EnvoyCounters extProcCounters() {
    Map<String, Long> counters = new LinkedHashMap<>();
    gateway.stats("http." + STAT_PREFIX + ".ext_proc.").forEach((name, value) ->
        counters.put(STAT_PREFIX + "." + name.substring(("http." + STAT_PREFIX + ".ext_proc.").length()), value));
    return new EnvoyCounters(counters);
  }
}
