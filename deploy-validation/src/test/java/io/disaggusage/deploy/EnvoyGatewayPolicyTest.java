package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * The Envoy Gateway objects under deploy/envoy-gateway/: the EnvoyExtensionPolicy CEL rules the schema
 * check cannot evaluate, the service's filter baseline as far as Envoy Gateway can express it, and
 * the Unix-socket sidecar wiring (Backend path = the socket the container listens on = the shared
 * volume both containers mount).
 */
class EnvoyGatewayPolicyTest {
  static final String DIR = "deploy/envoy-gateway";
  static final String API_VERSION = "gateway.envoyproxy.io/v1alpha1";
  static final Set<String> KINDS = Set.of("EnvoyExtensionPolicy", "Backend", "EnvoyProxy", "ClientTrafficPolicy", "EnvoyPatchPolicy");
  static final Set<String> TARGET_KINDS = Set.of("Gateway", "ListenerSet", "HTTPRoute", "GRPCRoute", "UDPRoute", "TCPRoute", "TLSRoute");
  static final Set<String> ROUTE_KINDS = Set.of("HTTPRoute", "GRPCRoute", "UDPRoute", "TCPRoute", "TLSRoute");
  /** The container running the service in the sidecar variant, and the proxy container EG creates. */
  static final String SIDECAR_CONTAINER = "disagg-usage-extproc";
  static final String PROXY_CONTAINER = "envoy";
  /** The environment variable of the service's Unix-socket listen setting (grpc.listen). */
  static final String LISTEN_ENV = "DISAGG_USAGE_GRPC_LISTEN";
  /** Envoy Gateway's proxy UID: the sidecar must run as it to share the socket. */
  static final long PROXY_UID = 65532;
  static final Pattern DURATION = Pattern.compile("([0-9]{1,5})(h|ms|m|s)");

  static List<Manifests.Doc> objects() {
    List<Manifests.Doc> docs = Manifests.objects(DIR);
    assertThat(docs).as("objects under " + DIR).isNotEmpty();
    return docs;
  }

  static List<Manifests.Doc> ofKind(String kind) {
    return objects().stream().filter(d -> d.kind().equals(kind)).toList();
  }

  // ---- CEL rules of the EnvoyExtensionPolicy CRD, hand-coded --------------------------------

  static List<String> celViolations(JsonNode policy) {
    List<String> v = new ArrayList<>();
    JsonNode spec = policy.path("spec");
    boolean targetRef = spec.has("targetRef");
    boolean targetRefs = spec.has("targetRefs");
    boolean selectors = spec.path("targetSelectors").size() > 0;
    if (!((targetRef && !targetRefs) || (!targetRef && targetRefs) || selectors)) {
      v.add("either targetRef or targetRefs must be used");
    }
    List<JsonNode> refs = new ArrayList<>();
    if (targetRef) {
      refs.add(spec.get("targetRef"));
    }
    spec.path("targetRefs").forEach(refs::add);
    for (JsonNode ref : refs) {
      if (!"gateway.networking.k8s.io".equals(ref.path("group").asText())) {
        v.add("this policy can only have a targetRef(s) group of gateway.networking.k8s.io");
      }
      if (!TARGET_KINDS.contains(ref.path("kind").asText())) {
        v.add("this policy cannot target kind " + ref.path("kind").asText());
      }
    }
    if (spec.has("mergeType") && !refs.stream().allMatch(r -> ROUTE_KINDS.contains(r.path("kind").asText()))) {
      v.add("mergeType can only be used with xRoute targets");
    }
    if (spec.path("extProc").size() > 16) {
      v.add("at most 16 extProc entries");
    }
    int i = 0;
    for (JsonNode ep : spec.path("extProc")) {
      String where = "extProc[" + i++ + "]: ";
      if (ep.has("backendRef")) {
        v.add(where + "BackendRefs must be used, backendRef is not supported.");
      }
      for (JsonNode ref : ep.path("backendRefs")) {
        String kind = ref.path("kind").asText("Service");
        String group = ref.path("group").asText("");
        if (!Set.of("Service", "ServiceImport", "Backend").contains(kind)) {
          v.add(where + "BackendRefs only supports Service, ServiceImport, and Backend kind.");
        }
        if (!Set.of("", "multicluster.x-k8s.io", "gateway.envoyproxy.io").contains(group)) {
          v.add(where + "BackendRefs only supports Core, multicluster.x-k8s.io, and gateway.envoyproxy.io groups.");
        }
        if (group.isEmpty() && kind.equals("Service") && !ref.has("port")) {
          v.add(where + "Must have port for Service reference");
        }
      }
      List<String> bodies = bodies(ep);
      if (ep.path("failOpen").asBoolean(false) && bodies.contains("FullDuplexStreamed")) {
        v.add(where + "If FullDuplexStreamed body processing mode is used, FailOpen must be false.");
      }
      if (ep.path("shadowMode").asBoolean(false) && bodies.stream().anyMatch(b -> !b.equals("Streamed"))) {
        v.add(where + "If shadowMode is enabled, body processing mode must be Streamed or unset.");
      }
      for (JsonNode ns : ep.path("metadata").path("writableNamespaces")) {
        if (ns.asText().startsWith("envoy.filters.http")) {
          v.add(where + "writableNamespaces cannot contain well-known Envoy HTTP filter namespaces");
        }
      }
    }
    return v;
  }

  static List<String> bodies(JsonNode extProc) {
    List<String> bodies = new ArrayList<>();
    for (String phase : List.of("request", "response")) {
      JsonNode body = extProc.path("processingMode").path(phase).path("body");
      if (!body.isMissingNode()) {
        bodies.add(body.asText());
      }
    }
    return bodies;
  }

  // ---- the service's baseline, as far as EnvoyExtensionPolicy expresses it ------------------

  static List<String> baselineViolations(JsonNode policy) {
    List<String> v = new ArrayList<>();
    JsonNode extProcs = policy.path("spec").path("extProc");
    if (extProcs.size() != 1) {
      v.add("exactly one extProc entry expected, found " + extProcs.size());
    }
    for (JsonNode ep : extProcs) {
      if (!ep.path("failOpen").asBoolean(false)) {
        v.add("failOpen must be true (usage accounting must never take LLM traffic down)");
      }
      JsonNode mode = ep.path("processingMode");
      if (!mode.path("allowModeOverride").asBoolean(false)) {
        v.add("processingMode.allowModeOverride must be true");
      }
      if (!mode.has("request") || !mode.has("response")) {
        v.add("processingMode.request and .response must be present (headers sent)");
      }
      if (!bodies(ep).isEmpty()) {
        v.add("no body mode: the service turns bodies on per exchange with mode_override");
      }
      if (ep.path("shadowMode").asBoolean(false)) {
        v.add("shadowMode must be off (the service rewrites bodies)");
      }
      List<String> writable = new ArrayList<>();
      ep.path("metadata").path("writableNamespaces").forEach(n -> writable.add(n.asText()));
      if (!writable.contains(ExtProcBaseline.NAMESPACE)) {
        v.add("metadata.writableNamespaces must include " + ExtProcBaseline.NAMESPACE);
      }
      long timeout = millis(ep.path("messageTimeout").asText("200ms"));
      if (timeout <= 0) {
        v.add("messageTimeout must be positive");
      }
      if (ep.path("backendRefs").size() != 1) {
        v.add("exactly one backendRef expected");
      }
      if (ep.has("statusOnError")) {
        v.add("statusOnError is meaningless when failing open");
      }
    }
    return v;
  }

  static long millis(String duration) {
    Matcher m = DURATION.matcher(duration);
    long total = 0;
    int end = 0;
    while (m.find() && m.start() == end) {
      long n = Long.parseLong(m.group(1));
      total += switch (m.group(2)) {
        case "h" -> n * 3_600_000;
        case "m" -> n * 60_000;
        case "s" -> n * 1000;
        default -> n;
      };
      end = m.end();
    }
    return end == duration.length() && end > 0 ? total : -1;
  }

  // ---- the shipped objects -------------------------------------------------------------------

  @Test
  void everyObjectIsAKnownEnvoyGatewayKindInItsNamespace() {
    for (Manifests.Doc d : objects()) {
      assertThat(d.kind()).as(d.toString()).isIn(KINDS);
      assertThat(d.node().path("apiVersion").asText()).as(d.toString()).isEqualTo(API_VERSION);
      assertThat(d.namespace()).as(d.toString()).isNotEmpty();
      if (!d.kind().equals("EnvoyProxy")) {
        assertThat(d.namespace()).as(d.toString()).isEqualTo(Manifests.NAMESPACE);
      }
    }
    int docs = ProjectFiles.yamlFiles(DIR).stream().mapToInt(f -> YamlDocuments.read(f).size()).sum();
    assertThat(objects()).as("documents without a kind under " + DIR).hasSize(docs);
  }

  @Test
  void policiesSatisfyTheCrdCelRules() {
    List<Manifests.Doc> policies = ofKind("EnvoyExtensionPolicy");
    assertThat(policies).hasSizeGreaterThanOrEqualTo(2);
    for (Manifests.Doc d : policies) {
      assertThat(celViolations(d.node())).as(d.toString()).isEmpty();
    }
  }

  /** The edge guard's policy: the one calling the edge guard's Service. */
  static boolean edgeGuard(Manifests.Doc policy) {
    for (JsonNode ref : policy.node().path("spec").path("extProc").path(0).path("backendRefs")) {
      if (ref.path("name").asText().equals(Manifests.EDGE_GUARD_SERVICE)) {
        return true;
      }
    }
    return false;
  }

  /** The usage service's policies (every EnvoyExtensionPolicy but the edge guard's). */
  static List<Manifests.Doc> usagePolicies() {
    return ofKind("EnvoyExtensionPolicy").stream().filter(d -> !edgeGuard(d)).toList();
  }

  /**
   * What deploy/envoy/edge-guard/envoy.yaml's filter does, in EnvoyExtensionPolicy terms: request headers
   * sent (request present), responses never (response absent), no body mode (the guard turns on the
   * streamed bodies it checks: allowModeOverride), fail open, 1 s per message, no metadata written.
   */
  static List<String> edgeGuardViolations(JsonNode policy) {
    JsonNode extProcs = policy.path("spec").path("extProc");
    JsonNode ep = extProcs.path(0);
    JsonNode mode = ep.path("processingMode");
    Map<String, Boolean> rules = new java.util.LinkedHashMap<>();
    rules.put("exactly one extProc entry", extProcs.size() == 1);
    rules.put("failOpen: true, as the edge bootstrap's failure_mode_allow", ep.path("failOpen").asBoolean(false));
    rules.put("processingMode.allowModeOverride: true (the guard turns on streamed request bodies)",
        mode.path("allowModeOverride").asBoolean(false));
    rules.put("processingMode.request present (request headers sent)", mode.has("request"));
    rules.put("processingMode.response absent (responses are never sent to the guard)", !mode.has("response"));
    rules.put("no body mode (the guard turns bodies on per request)", bodies(ep).isEmpty());
    rules.put("messageTimeout 1s, as the edge bootstrap's", millis(ep.path("messageTimeout").asText("200ms")) == 1000);
    rules.put("no metadata (the guard writes none)", !ep.has("metadata"));
    rules.put("no shadowMode, no statusOnError", !ep.path("shadowMode").asBoolean(false) && !ep.has("statusOnError"));
    rules.put("exactly one backendRef", ep.path("backendRefs").size() == 1);
    List<String> v = new ArrayList<>();
    rules.forEach((rule, held) -> {
      if (!held) {
        v.add("broken: " + rule);
      }
    });
    return v;
  }

  @Test
  void theEdgeGuardPolicyFollowsTheEdgeBootstrapAndTargetsTheClientRouteOnly() {
    List<Manifests.Doc> guards = ofKind("EnvoyExtensionPolicy").stream().filter(EnvoyGatewayPolicyTest::edgeGuard).toList();
    assertThat(guards).hasSize(1);
    Manifests.Doc d = guards.get(0);
    assertThat(edgeGuardViolations(d.node())).as(d.toString()).isEmpty();
    JsonNode ref = d.node().at("/spec/extProc/0/backendRefs/0");
    assertThat(ref.path("kind").asText()).isEqualTo("Service");
    assertThat(ref.path("port").asInt()).isEqualTo(Manifests.edgeGuardGrpcPort());
    // An HTTPRoute, never a Gateway (which may carry the worker route too), never a route a usage policy targets.
    assertThat(d.node().path("spec").path("targetRefs")).singleElement().satisfies(t -> {
      assertThat(t.path("kind").asText()).isEqualTo("HTTPRoute");
      assertThat(t.path("name").asText()).isEqualTo(Manifests.CLIENT_ROUTE);
    });
    assertThat(d.node().path("spec").has("targetSelectors")).isFalse();
    for (Manifests.Doc usage : usagePolicies()) {
      usage.node().path("spec").path("targetRefs").forEach(t ->
          assertThat(t.path("name").asText()).as(usage + " targets the worker route, not the client's")
              .isNotEqualTo(Manifests.CLIENT_ROUTE));
    }
  }

  @Test
  void edgeGuardCheckerRejectsResponsesBodiesAndAnotherTimeout() {
    JsonNode good = ofKind("EnvoyExtensionPolicy").stream().filter(EnvoyGatewayPolicyTest::edgeGuard).findFirst()
        .orElseThrow().node();
    com.fasterxml.jackson.databind.node.ObjectNode bad = good.deepCopy();
    com.fasterxml.jackson.databind.node.ObjectNode ep = (com.fasterxml.jackson.databind.node.ObjectNode) bad.at("/spec/extProc/0");
    ((com.fasterxml.jackson.databind.node.ObjectNode) ep.path("processingMode")).putObject("response");
    ((com.fasterxml.jackson.databind.node.ObjectNode) ep.path("processingMode").path("request")).put("body", "Streamed");
    ep.put("messageTimeout", "200ms");
    ep.putObject("metadata").putArray("writableNamespaces").add("disagg_usage");
    assertThat(edgeGuardViolations(bad)).hasSize(4);
    assertThat(baselineViolations(good)).as("the usage baseline does not fit the guard").isNotEmpty();
  }

  @Test
  void policiesFollowTheBaselineAsFarAsEnvoyGatewayExpressesIt() {
    for (Manifests.Doc d : usagePolicies()) {
      assertThat(baselineViolations(d.node())).as(d.toString()).isEmpty();
      for (JsonNode ref : d.node().path("spec").path("targetRefs")) {
        assertThat(ref.path("kind").asText()).as(d + ": the policy attaches to the worker route or its Gateway")
            .isIn("HTTPRoute", "Gateway");
      }
    }
  }

  @Test
  void backendRefsReachTheCentralServiceOrAShippedBackend() {
    int services = 0;
    int backends = 0;
    for (Manifests.Doc d : ofKind("EnvoyExtensionPolicy")) {
      for (JsonNode ref : d.node().path("spec").path("extProc").path(0).path("backendRefs")) {
        String kind = ref.path("kind").asText("Service");
        if (kind.equals("Service") && edgeGuard(d)) {
          assertThat(ref.path("port").asInt()).as(d.toString()).isEqualTo(Manifests.edgeGuardGrpcPort());
        } else if (kind.equals("Service")) {
          services++;
          assertThat(ref.path("name").asText()).as(d.toString()).isEqualTo(Manifests.CENTRAL_SERVICE);
          assertThat(ref.path("port").asInt()).as(d.toString()).isEqualTo(Manifests.centralGrpcPort());
        } else {
          backends++;
          assertThat(kind).isEqualTo("Backend");
          assertThat(ref.path("group").asText()).isEqualTo("gateway.envoyproxy.io");
          String namespace = ref.path("namespace").asText(d.namespace());
          assertThat(ofKind("Backend")).as(d + ": Backend " + ref.path("name").asText() + " in " + namespace)
              .anySatisfy(b -> {
                assertThat(b.name()).isEqualTo(ref.path("name").asText());
                assertThat(b.namespace()).isEqualTo(namespace);
              });
        }
      }
    }
    assertThat(services).as("policies calling the central Service").isPositive();
    assertThat(backends).as("policies calling the sidecar's Backend").isPositive();
  }

  /** The sidecar's EnvoyProxy patch: the one EnvoyProxy that patches the proxy Deployment. */
  static JsonNode podSpecPatch() {
    List<Manifests.Doc> proxies = ofKind("EnvoyProxy").stream()
        .filter(d -> d.node().at("/spec/provider/kubernetes/envoyDeployment").isObject()).toList();
    assertThat(proxies).hasSize(1);
    JsonNode patch = proxies.get(0).node().at("/spec/provider/kubernetes/envoyDeployment/patch");
    assertThat(proxies.get(0).node().at("/spec/provider/type").asText()).isEqualTo("Kubernetes");
    assertThat(patch.path("type").asText()).isEqualTo("StrategicMerge");
    return patch.at("/value/spec/template/spec");
  }

  static JsonNode container(JsonNode podSpec, String name) {
    for (JsonNode c : podSpec.path("containers")) {
      if (c.path("name").asText().equals(name)) {
        return c;
      }
    }
    throw new AssertionError("no container " + name + " in the EnvoyProxy patch");
  }

  static Optional<String> mountPath(JsonNode container, String volume) {
    for (JsonNode m : container.path("volumeMounts")) {
      if (m.path("name").asText().equals(volume)) {
        return Optional.of(m.path("mountPath").asText());
      }
    }
    return Optional.empty();
  }

  @Test
  void unixBackendPathIsTheSocketTheSidecarListensOnInTheSharedVolume() {
    List<Manifests.Doc> backends = ofKind("Backend");
    assertThat(backends).hasSize(1);
    JsonNode endpoints = backends.get(0).node().at("/spec/endpoints");
    assertThat(endpoints).hasSize(1);
    assertThat(endpoints.get(0).fieldNames()).toIterable().containsExactly("unix");
    String socket = endpoints.get(0).at("/unix/path").asText();
    assertThat(socket).startsWith("/").endsWith(".sock");

    JsonNode pod = podSpecPatch();
    JsonNode sidecar = container(pod, SIDECAR_CONTAINER);
    Map<String, String> env = new java.util.HashMap<>();
    sidecar.path("env").forEach(e -> env.put(e.path("name").asText(), e.path("value").asText()));
    assertThat(env).containsEntry(LISTEN_ENV, "unix://" + socket);

    String socketDir = Path.of(socket).getParent().toString();
    JsonNode shared = null;
    for (JsonNode volume : pod.path("volumes")) {
      if (mountPath(sidecar, volume.path("name").asText()).filter(socketDir::equals).isPresent()) {
        shared = volume;
      }
    }
    assertThat(shared).as("a volume the sidecar mounts at " + socketDir).isNotNull();
    assertThat(shared.has("emptyDir")).as("the socket volume is an emptyDir").isTrue();
    assertThat(mountPath(container(pod, PROXY_CONTAINER), shared.path("name").asText()))
        .as("the proxy container mounts the socket volume at the same path").contains(socketDir);
  }

  @Test
  void sidecarContainerRunsAsTheProxyUserRestricted() {
    JsonNode pod = podSpecPatch();
    JsonNode sidecar = container(pod, SIDECAR_CONTAINER);
    JsonNode security = sidecar.path("securityContext");
    assertThat(security.path("runAsUser").asLong()).isEqualTo(PROXY_UID);
    assertThat(security.path("runAsNonRoot").asBoolean(false)).isTrue();
    assertThat(security.path("allowPrivilegeEscalation").asBoolean(true)).isFalse();
    assertThat(security.path("readOnlyRootFilesystem").asBoolean(false)).isTrue();
    assertThat(security.at("/capabilities/drop").toString()).contains("ALL");
    assertThat(security.at("/seccompProfile/type").asText()).isEqualTo("RuntimeDefault");
    List<String> emptyDirMounts = new ArrayList<>();
    for (JsonNode volume : pod.path("volumes")) {
      if (volume.has("emptyDir")) {
        mountPath(sidecar, volume.path("name").asText()).ifPresent(emptyDirMounts::add);
      }
    }
    assertThat(emptyDirMounts).as("a writable /tmp for Netty's native libraries").contains("/tmp");
    assertThat(sidecar.path("image").asText()).isEqualTo(KubernetesManifests.EXTPROC_IMAGE);
  }

  /**
   * The sidecar shares the gateway pod, whose readiness counts every container's: nothing of it may make
   * the gateway unready — no probes (its /readyz is 503 while Redis is down), and a bad config idles
   * rather than crash-looping.
   */
  @Test
  void sidecarCannotMakeTheGatewayPodUnready() {
    JsonNode sidecar = container(podSpecPatch(), SIDECAR_CONTAINER);
    for (String probe : List.of("startupProbe", "readinessProbe", "livenessProbe")) {
      assertThat(sidecar.has(probe)).as("the gateway pod's extproc container has no " + probe).isFalse();
    }
    assertThat(env(sidecar, "DISAGG_USAGE_ON_STARTUP_FAILURE")).as("idles on a bad config").contains("idle");
  }

  private static Optional<String> env(JsonNode container, String name) {
    for (JsonNode e : container.path("env")) {
      if (e.path("name").asText().equals(name)) {
        return Optional.of(e.path("value").asText());
      }
    }
    return Optional.empty();
  }

  // ---- the request-id fix, the EnvoyPatchPolicy, the access log --------------------------------

  /** The cluster fixture egctl translates the files with (the Gateway the policies name). */
  static List<JsonNode> clusterFixture() {
    return YamlDocuments.read(ProjectFiles.resolve("deploy-validation/src/test/resources/envoy-gateway/cluster.yaml"));
  }

  static JsonNode fixtureGateway(String name) {
    return clusterFixture().stream().filter(d -> d.path("kind").asText().equals("Gateway"))
        .filter(d -> d.at("/metadata/name").asText().equals(name)).findFirst()
        .orElseThrow(() -> new AssertionError("no Gateway " + name + " in the cluster fixture"));
  }

  /**
   * The request-id fix: a ClientTrafficPolicy on the worker route's Gateway that keeps a caller's
   * x-request-id (PreserveOrGenerate), with the deprecated preserveXRequestID not set beside it (the
   * CRD's CEL rule).
   */
  @Test
  void theRequestIdFixKeepsTheCallersIdOnTheWorkersGateway() {
    List<Manifests.Doc> policies = ofKind("ClientTrafficPolicy");
    assertThat(policies).hasSize(1);
    JsonNode spec = policies.get(0).node().path("spec");
    assertThat(spec.at("/headers/requestID").asText()).isEqualTo("PreserveOrGenerate");
    assertThat(spec.at("/headers").has("preserveXRequestID")).as("preserveXRequestID and requestID cannot both be set").isFalse();
    assertThat(spec.path("targetRefs")).hasSize(1);
    JsonNode ref = spec.path("targetRefs").get(0);
    assertThat(ref.path("group").asText()).isEqualTo("gateway.networking.k8s.io");
    assertThat(ref.path("kind").asText()).isEqualTo("Gateway");
    fixtureGateway(ref.path("name").asText());
    assertThat(routeParents()).as("the Gateway the worker route attaches to").contains(ref.path("name").asText());
  }

  static List<String> routeParents() {
    List<String> parents = new ArrayList<>();
    clusterFixture().stream().filter(d -> d.path("kind").asText().equals("HTTPRoute"))
        .forEach(route -> route.at("/spec/parentRefs").forEach(p -> parents.add(p.path("name").asText())));
    return parents;
  }

  /**
   * The EnvoyPatchPolicy: on the worker route's Gateway, JSONPatch operations on that Gateway's listener
   * (Envoy Gateway's name for it: namespace/gateway/listener), each selecting the ext_proc filter by a
   * jsonPath match — never by Envoy Gateway's generated filter name, which differs between providers —
   * and adding what the baseline has and EnvoyExtensionPolicy cannot express.
   */
  @Test
  void thePatchPolicySelectsTheFilterByMatchAndAddsTheMissingBaseline() {
    List<Manifests.Doc> patches = ofKind("EnvoyPatchPolicy");
    assertThat(patches).hasSize(1);
    Manifests.Doc patch = patches.get(0);
    JsonNode spec = patch.node().path("spec");
    assertThat(spec.path("type").asText()).isEqualTo("JSONPatch");
    assertThat(spec.at("/targetRef/kind").asText()).isEqualTo("Gateway");
    JsonNode gateway = fixtureGateway(spec.at("/targetRef/name").asText());
    List<String> listeners = new ArrayList<>();
    gateway.at("/spec/listeners").forEach(l -> listeners.add(patch.namespace() + "/" + gateway.at("/metadata/name").asText()
        + "/" + l.path("name").asText()));
    Map<String, JsonNode> added = new java.util.HashMap<>();
    for (JsonNode p : spec.path("jsonPatches")) {
      assertThat(p.path("type").asText()).isEqualTo("type.googleapis.com/envoy.config.listener.v3.Listener");
      assertThat(p.path("name").asText()).as("a listener of the Gateway").isIn(listeners);
      JsonNode op = p.path("operation");
      assertThat(op.path("op").asText()).isEqualTo("add");
      String jsonPath = op.path("jsonPath").asText();
      assertThat(jsonPath).as("the filter chosen by a match").contains("http_filters[?(");
      assertThat(jsonPath + op.path("path").asText()).as("no generated filter name")
          .doesNotContain("ext_proc/").doesNotContain("envoyextensionpolicy");
      added.put(op.path("path").asText(), op.path("value"));
    }
    assertThat(added.get("/typed_config/max_message_timeout").asText()).as("max_message_timeout").isEqualTo("3s");
    assertThat(added.get("/typed_config/request_attributes").toString()).isEqualTo("[\"xds.cluster_name\"]");
    // The match is on what both shipped usage policies declare: the metadata namespace they may write. The
    // edge guard's policy declares none, so the patch never lands on the guard's filter.
    for (JsonNode p : spec.path("jsonPatches")) {
      assertThat(p.at("/operation/jsonPath").asText()).contains("'" + ExtProcBaseline.NAMESPACE + "'");
    }
    for (Manifests.Doc policy : usagePolicies()) {
      assertThat(policy.node().at("/spec/extProc/0/metadata/writableNamespaces/0").asText()).as(policy.toString())
          .isEqualTo(ExtProcBaseline.NAMESPACE);
    }
    for (Manifests.Doc policy : ofKind("EnvoyExtensionPolicy")) {
      if (edgeGuard(policy)) {
        assertThat(policy.node().at("/spec/extProc/0/metadata").isMissingNode()).as(policy.toString()).isTrue();
      }
    }
  }

  /**
   * Every EnvoyProxy writes the access log a billing pipeline reads: the shipped bootstrap's format,
   * with the service's disagg_usage metadata, to the proxy's stdout.
   */
  @Test
  void everyEnvoyProxyLogsTheShippedAccessLogFormat() {
    JsonNode bootstrap = YamlDocuments.single(ProjectFiles.resolve("deploy/envoy/envoy.yaml"));
    String format = bootstrap.findValues("inline_string").get(0).asText();
    assertThat(format).contains("%DYNAMIC_METADATA(" + ExtProcBaseline.NAMESPACE + ":outcome)%");
    List<Manifests.Doc> proxies = ofKind("EnvoyProxy");
    assertThat(proxies).hasSizeGreaterThanOrEqualTo(2);
    for (Manifests.Doc proxy : proxies) {
      JsonNode settings = proxy.node().at("/spec/telemetry/accessLog/settings");
      assertThat(settings).as(proxy.toString()).hasSize(1);
      assertThat(settings.get(0).at("/format/type").asText()).isEqualTo("Text");
      assertThat(settings.get(0).at("/format/text").asText()).as(proxy.toString()).isEqualTo(format);
      assertThat(settings.get(0).at("/sinks/0/file/path").asText()).isEqualTo("/dev/stdout");
    }
  }

  // ---- the checkers catch what they claim to -------------------------------------------------

  static ObjectNode centralPolicy() {
    return (ObjectNode) usagePolicies().stream()
        .filter(d -> d.node().at("/spec/extProc/0/backendRefs/0/kind").asText("Service").equals("Service"))
        .findFirst().orElseThrow().node().deepCopy();
  }

  @Test
  void celCheckerRejectsFullDuplexWithFailOpenAndTheSingularBackendRef() {
    ObjectNode fullDuplex = centralPolicy();
    ((ObjectNode) fullDuplex.at("/spec/extProc/0/processingMode/response")).put("body", "FullDuplexStreamed");
    Problems.assertEachNamed(celViolations(fullDuplex), "FailOpen must be false");

    ObjectNode singular = centralPolicy();
    ObjectNode ep = (ObjectNode) singular.at("/spec/extProc/0");
    ep.set("backendRef", ep.path("backendRefs").get(0));
    Problems.assertEachNamed(celViolations(singular), "backendRef is not supported");

    ObjectNode noPort = centralPolicy();
    ((ObjectNode) noPort.at("/spec/extProc/0/backendRefs/0")).remove("port");
    Problems.assertEachNamed(celViolations(noPort), "Must have port");

    ObjectNode bothTargets = centralPolicy();
    ((ObjectNode) bothTargets.path("spec")).set("targetRef", bothTargets.at("/spec/targetRefs/0"));
    assertThat(celViolations(bothTargets)).contains("either targetRef or targetRefs must be used");
  }

  @Test
  void baselineCheckerRejectsBodiesFailClosedAndAMissingNamespace() {
    ObjectNode streamed = centralPolicy();
    ((ObjectNode) streamed.at("/spec/extProc/0/processingMode/response")).put("body", "Streamed");
    Problems.assertEachNamed(baselineViolations(streamed), "no body mode");

    ObjectNode closed = centralPolicy();
    ((ObjectNode) closed.at("/spec/extProc/0")).put("failOpen", false);
    ((ObjectNode) closed.at("/spec/extProc/0/processingMode")).remove("allowModeOverride");
    ((ObjectNode) closed.at("/spec/extProc/0/processingMode")).remove("request");
    ((ObjectNode) closed.at("/spec/extProc/0/metadata")).putArray("writableNamespaces").add("other");
    assertThat(baselineViolations(closed))
        .anySatisfy(s -> assertThat(s).contains("failOpen"))
        .anySatisfy(s -> assertThat(s).contains("allowModeOverride"))
        .anySatisfy(s -> assertThat(s).contains("headers sent"))
        .anySatisfy(s -> assertThat(s).contains(ExtProcBaseline.NAMESPACE));
  }

  @Test
  void durationsFollowTheCrdFormat() {
    assertThat(millis("200ms")).isEqualTo(200);
    assertThat(millis("1m30s")).isEqualTo(90_000);
    assertThat(millis("0.2s")).isEqualTo(-1);
    assertThat(millis("")).isEqualTo(-1);
  }

  // ---- what Envoy Gateway cannot express, kept honest against the CRD ------------------------

  @Test
  void theGapsTheReadmeDocumentsStillExistInTheCrd() throws IOException {
    var validator = CrdSchemas.forKind("EnvoyExtensionPolicy");
    Assumptions.assumeTrue(validator.isPresent(), "../shared/schemas not present: CRD schema validation skipped");
    JsonNode extProc = validator.get().openApiSchema().at("/properties/spec/properties/extProc/items");
    // No max_message_timeout: override_message_timeout from the service is ignored by Envoy.
    List<String> fields = new ArrayList<>();
    extProc.path("properties").fieldNames().forEachRemaining(fields::add);
    assertThat(fields).contains("messageTimeout", "failOpen", "processingMode", "metadata")
        .noneMatch(f -> f.toLowerCase().contains("maxmessagetimeout"));
    // No xds.cluster_name attribute: the attribute pattern admits only some prefixes.
    String pattern = extProc.at("/properties/processingMode/properties/request/properties/attributes/items/pattern").asText();
    assertThat(pattern).isNotEmpty();
    assertThat(Pattern.compile(pattern).matcher("xds.cluster_name").find()).isFalse();
    assertThat(Pattern.compile(pattern).matcher("xds.route_name").find()).isTrue();
    String readme = Files.readString(ProjectFiles.resolve(DIR + "/README.md"));
    assertThat(readme).contains("max_message_timeout").contains("xds.cluster_name").contains("EnvoyPatchPolicy");
  }
}
