package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.protobuf.Any;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import io.envoyproxy.envoy.config.cluster.v3.CircuitBreakers;
import io.envoyproxy.envoy.config.cluster.v3.Cluster;
import io.envoyproxy.envoy.config.core.v3.SocketAddress;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.envoyproxy.envoy.config.listener.v3.Filter;
import io.envoyproxy.envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager;
import io.envoyproxy.envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter;
import io.envoyproxy.envoy.extensions.upstreams.http.v3.HttpProtocolOptions;
import java.io.IOException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * Every EnvoyFilter under istio/: each patch value parsed strictly into Envoy's proto for its
 * {@code applyTo}, the ext_proc filter on the service's baseline, clusters that exist, the selection
 * rules the CRD states in CEL, and the ports the rest of the tree uses.
 */
class IstioEnvoyFilterTest {
  static final String HCM = "envoy.filters.network.http_connection_manager";
  static final String ROUTER = "envoy.filters.http.router";
  static final String EXT_PROC_TYPE = ExternalProcessor.getDescriptor().getFullName();
  static final Pattern OUTBOUND = Pattern.compile("outbound\\|(\\d+)\\|([^|]*)\\|(.+)");
  /** The name the usage service's filter has in every shipped EnvoyFilter. */
  static final String USAGE_FILTER_NAME = "envoy.filters.http.ext_proc.disagg_usage";
  static final Set<String> KNOWN_CONTEXTS = Set.of("SIDECAR_OUTBOUND", "GATEWAY");

  static List<Manifests.Doc> istioObjects() {
    return Manifests.objects("istio");
  }

  static List<Manifests.Doc> envoyFilters() {
    List<Manifests.Doc> filters = istioObjects().stream().filter(d -> d.kind().equals("EnvoyFilter")).toList();
    assertThat(filters).as("EnvoyFilters under istio/").isNotEmpty();
    return filters;
  }

  // ---- the checker ---------------------------------------------------------------------------

  /** Every way an EnvoyFilter object departs from the project's rules; empty when it complies. */
  static List<String> problems(JsonNode filter) {
    List<String> p = new ArrayList<>();
    if (!"networking.istio.io/v1alpha3".equals(filter.path("apiVersion").asText())) {
      p.add("apiVersion must be networking.istio.io/v1alpha3");
    }
    if (!"EnvoyFilter".equals(filter.path("kind").asText())) {
      p.add("kind must be EnvoyFilter");
    }
    String namespace = filter.path("metadata").path("namespace").asText();
    if (!Manifests.NAMESPACE.equals(namespace)) {
      // A root-namespace filter without a selector would patch every proxy of the mesh.
      p.add("metadata.namespace must be " + Manifests.NAMESPACE + ", was '" + namespace + "'");
    }
    JsonNode spec = filter.path("spec");
    selection(spec, p);

    List<JsonNode> patches = new ArrayList<>();
    spec.path("configPatches").forEach(patches::add);
    if (patches.isEmpty()) {
      p.add("spec.configPatches is empty");
    }
    Map<String, Cluster> clusters = new java.util.HashMap<>();
    List<HttpFilterPatch> httpFilters = new ArrayList<>();
    int requestIdPatches = 0;
    for (int i = 0; i < patches.size(); i++) {
      JsonNode patch = patches.get(i);
      String where = "configPatches[" + i + "]";
      String applyTo = patch.path("applyTo").asText();
      Descriptor type = EnvoyProtos.PATCH_TYPES.get(applyTo);
      if (type == null) {
        p.add(where + ": applyTo " + applyTo + " has no known patch type");
        continue;
      }
      Message value;
      try {
        value = EnvoyProtos.parse(patch.path("patch").path("value"), type);
      } catch (IllegalArgumentException e) {
        p.add(where + ": patch.value does not parse as " + type.getFullName() + ": " + e.getMessage());
        continue;
      }
      try {
        EnvoyProtos.deprecatedFields(value).forEach(f -> p.add(where + ": deprecated field " + f));
      } catch (IllegalArgumentException e) {
        p.add(where + ": " + e.getMessage());
        continue;
      }
      switch (applyTo) {
        case "CLUSTER" -> {
          Cluster c = reparse(value, Cluster.parser());
          clusterRules(where, patch, c, p);
          clusters.put(c.getName(), c);
        }
        case "HTTP_FILTER" -> httpFilters.add(new HttpFilterPatch(where, patch, reparse(value, HttpFilter.parser())));
        case "NETWORK_FILTER" -> {
          requestIdRules(where, patch, spec, reparse(value, Filter.parser()), p);
          requestIdPatches++;
        }
        default -> p.add(where + ": applyTo " + applyTo + " is not used by the shipped filters");
      }
    }
    if (httpFilters.isEmpty() && requestIdPatches == 0) {
      p.add("no HTTP_FILTER patch");
    }
    if (!httpFilters.isEmpty() && requestIdPatches > 0) {
      p.add("the request-id fix ships in a file of its own, beside the ext_proc filter it completes");
    }
    for (HttpFilterPatch f : httpFilters) {
      httpFilterRules(f, spec, namespace, clusters.keySet(), p);
    }
    return p;
  }

  record HttpFilterPatch(String where, JsonNode patch, HttpFilter filter) {}

  /** The CRD's CEL rule (at most one of the two) plus ours (at least one: never every workload). */
  static void selection(JsonNode spec, List<String> p) {
    boolean selector = spec.has("workloadSelector");
    boolean targetRefs = spec.has("targetRefs");
    if (selector && targetRefs) {
      p.add("only one of targetRefs or workloadSelector can be set");
    }
    if (!selector && !targetRefs) {
      p.add("one of workloadSelector or targetRefs must be set (else every workload of the namespace is patched)");
    }
    if (selector) {
      JsonNode labels = spec.path("workloadSelector").path("labels");
      if (labels.isEmpty()) {
        p.add("workloadSelector.labels is empty");
      }
      labels.fields().forEachRemaining(e -> {
        if (e.getValue().asText().contains("*")) {
          p.add("wildcard is not supported in selector: " + e.getKey());
        }
      });
    }
    for (JsonNode ref : spec.path("targetRefs")) {
      if (!ref.path("namespace").asText().isEmpty()) {
        p.add("targetRefs: cross namespace referencing is not supported");
      }
      if (!"gateway.networking.k8s.io".equals(ref.path("group").asText()) || !"Gateway".equals(ref.path("kind").asText())) {
        p.add("targetRefs must name Gateway API Gateways: " + ref);
      }
    }
  }

  /**
   * The gateway's request-id fix: a MERGE into the gateway's HTTP connection manager that sets
   * {@code preserve_external_request_id: true} and nothing else (a MERGE may not change what istiod generates
   * beyond that), scoped to a gateway by {@code targetRefs}.
   */
  static void requestIdRules(String where, JsonNode patch, JsonNode spec, Filter filter, List<String> p) {
    if (!"MERGE".equals(patch.path("patch").path("operation").asText())) {
      p.add(where + ": the request-id fix must MERGE into the connection manager");
    }
    if (!"GATEWAY".equals(patch.path("match").path("context").asText())) {
      p.add(where + ": the request-id fix belongs to the GATEWAY context (sidecars keep the id already)");
    }
    if (!spec.has("targetRefs")) {
      p.add(where + ": the request-id fix must be scoped to the gateway by targetRefs");
    }
    if (!HCM.equals(patch.at("/match/listener/filterChain/filter/name").asText())
        || patch.at("/match/listener/filterChain/filter").has("subFilter")) {
      p.add(where + ": match must be the filter " + HCM + " itself");
    }
    Message config;
    try {
      config = EnvoyProtos.unpack(filter.getTypedConfig());
    } catch (IllegalArgumentException e) {
      p.add(where + ": typed_config: " + e.getMessage());
      return;
    }
    if (!config.getDescriptorForType().getFullName().equals(HttpConnectionManager.getDescriptor().getFullName())) {
      p.add(where + ": typed_config must be an HttpConnectionManager, was " + config.getDescriptorForType().getFullName());
      return;
    }
    HttpConnectionManager hcm = reparse(config, HttpConnectionManager.parser());
    if (!hcm.getPreserveExternalRequestId()) {
      p.add(where + ": preserve_external_request_id must be true");
    }
    if (!hcm.equals(HttpConnectionManager.newBuilder().setPreserveExternalRequestId(true).build())) {
      p.add(where + ": the MERGE sets more than preserve_external_request_id: " + hcm);
    }
  }

  static void clusterRules(String where, JsonNode patch, Cluster c, List<String> p) {
    if (!"ADD".equals(patch.path("patch").path("operation").asText())) {
      p.add(where + ": a CLUSTER patch must ADD");
    }
    if (c.getName().isEmpty() || c.getName().contains("|")) {
      p.add(where + ": hand-made cluster names must be non-empty and free of '|': " + c.getName());
    }
    if (!c.getLoadAssignment().getClusterName().equals(c.getName())) {
      p.add(where + ": load_assignment.cluster_name differs from the cluster name");
    }
    if (c.getType() != Cluster.DiscoveryType.STATIC) {
      p.add(where + ": the localhost processor cluster must be STATIC");
    }
    List<SocketAddress> addresses = c.getLoadAssignment().getEndpointsList().stream()
        .flatMap(e -> e.getLbEndpointsList().stream())
        .map(e -> e.getEndpoint().getAddress().getSocketAddress())
        .toList();
    if (addresses.isEmpty() || !addresses.stream().allMatch(
        a -> a.getAddress().equals("127.0.0.1") && a.getPortValue() == Manifests.DEFAULT_GRPC_PORT)) {
      p.add(where + ": endpoints must be 127.0.0.1:" + Manifests.DEFAULT_GRPC_PORT + ", were " + addresses);
    }
    String http2 = where + ": the processor cluster must speak HTTP/2 (HttpProtocolOptions.explicit_http_config.http2_protocol_options)";
    Any options = c.getTypedExtensionProtocolOptionsOrDefault("envoy.extensions.upstreams.http.v3.HttpProtocolOptions", null);
    try {
      if (options == null || !options.unpack(HttpProtocolOptions.class).getExplicitHttpConfig().hasHttp2ProtocolOptions()) {
        p.add(http2);
      }
    } catch (InvalidProtocolBufferException e) {
      p.add(http2 + ": " + e.getMessage());
    }
    ExtProcClusterHealth.violations(c).forEach(h -> p.add(where + ": " + h));
    List<CircuitBreakers.Thresholds> thresholds = c.getCircuitBreakers().getThresholdsList();
    if (thresholds.isEmpty() || !thresholds.stream().allMatch(t -> t.getMaxRequests().getValue() >= 10_000
        && t.getMaxPendingRequests().getValue() >= 10_000 && t.getMaxConnections().getValue() >= 10_000)) {
      p.add(where + ": circuit breakers must be raised (>= 10000): one ext_proc stream per in-flight request");
    }
  }

  static void httpFilterRules(HttpFilterPatch f, JsonNode spec, String namespace, Set<String> localClusters, List<String> p) {
    String where = f.where();
    JsonNode patch = f.patch();
    if (!"INSERT_BEFORE".equals(patch.path("patch").path("operation").asText())) {
      p.add(where + ": the filter must be inserted with INSERT_BEFORE the router");
    }
    JsonNode listener = patch.path("match").path("listener");
    JsonNode filterMatch = listener.path("filterChain").path("filter");
    if (!HCM.equals(filterMatch.path("name").asText()) || !ROUTER.equals(filterMatch.path("subFilter").path("name").asText())) {
      p.add(where + ": match must be " + HCM + " / subFilter " + ROUTER);
    }
    String context = patch.path("match").path("context").asText();
    if (!KNOWN_CONTEXTS.contains(context)) {
      p.add(where + ": context " + context + " is not one the shipped filters use " + KNOWN_CONTEXTS);
    }
    if (context.equals("SIDECAR_OUTBOUND") && listener.path("portNumber").asInt(-1) != Manifests.workerPort()) {
      p.add(where + ": listener.portNumber must be the worker Services' port " + Manifests.workerPort()
          + ", was " + listener.path("portNumber"));
    }
    if (context.equals("GATEWAY") && !spec.has("targetRefs") && !spec.has("workloadSelector")) {
      p.add(where + ": a GATEWAY patch must be scoped to a gateway");
    }
    if (context.equals("SIDECAR_OUTBOUND") && !spec.has("workloadSelector")) {
      p.add(where + ": a SIDECAR_OUTBOUND patch must select the orchestrator pods");
    }
    Message config;
    try {
      config = EnvoyProtos.unpack(f.filter().getTypedConfig());
    } catch (IllegalArgumentException e) {
      p.add(where + ": typed_config: " + e.getMessage());
      return;
    }
    if (!config.getDescriptorForType().getFullName().equals(EXT_PROC_TYPE)) {
      p.add(where + ": the inserted filter is not ext_proc but " + config.getDescriptorForType().getFullName());
      return;
    }
    ExternalProcessor extProc = reparse(config, ExternalProcessor.parser());
    EnvoyProtos.deprecatedFields(extProc).forEach(d -> p.add(where + ": deprecated field " + d));
    String guardHost = Manifests.EDGE_GUARD_SERVICE + "." + namespace + ".svc.cluster.local";
    boolean edgeGuard = extProc.getGrpcService().getEnvoyGrpc().getClusterName()
        .equals("outbound|" + Manifests.edgeGuardGrpcPort() + "||" + guardHost);
    if (edgeGuard) {
      // The client-facing gateway only: on a sidecar's outbound calls it would strip the orchestrator's markers.
      if (!context.equals("GATEWAY") || !spec.has("targetRefs")) {
        p.add(where + ": the edge guard belongs on a client-facing gateway named by targetRefs");
      }
      EdgeGuardBaseline.violations(extProc).forEach(v -> p.add(where + ": " + v));
      if (f.filter().getName().equals(USAGE_FILTER_NAME)) {
        p.add(where + ": the edge guard's filter needs a name of its own, not " + USAGE_FILTER_NAME);
      }
      String authority = extProc.getGrpcService().getEnvoyGrpc().getAuthority();
      if (!authority.equals(guardHost)) {
        p.add(where + ": authority " + authority + " is not the guard Service's host " + guardHost);
      }
      return;
    }
    ExtProcBaseline.violations(extProc).forEach(v -> p.add(where + ": " + v));
    if (!f.filter().getName().startsWith("envoy.filters.http.ext_proc")) {
      p.add(where + ": filter name should keep the envoy.filters.http.ext_proc prefix");
    }
    if (!extProc.getGrpcService().hasEnvoyGrpc()) {
      p.add(where + ": grpc_service must use envoy_grpc (an Envoy cluster)");
      return;
    }
    String cluster = extProc.getGrpcService().getEnvoyGrpc().getClusterName();
    String authority = extProc.getGrpcService().getEnvoyGrpc().getAuthority();
    if (cluster.contains("|") && authority.isEmpty()) {
      p.add(where + ": envoy_grpc.authority must be set: the cluster name contains '|'");
    }
    Matcher outbound = OUTBOUND.matcher(cluster);
    if (localClusters.contains(cluster)) {
      if (!authority.equals("localhost")) {
        p.add(where + ": the localhost cluster's authority should be localhost, was '" + authority + "'");
      }
    } else if (outbound.matches()) {
      String host = Manifests.CENTRAL_SERVICE + "." + namespace + ".svc.cluster.local";
      if (Integer.parseInt(outbound.group(1)) != Manifests.centralGrpcPort() || !outbound.group(3).equals(host)) {
        p.add(where + ": " + cluster + " is not the central Service's gRPC port outbound|"
            + Manifests.centralGrpcPort() + "||" + host);
      }
      if (!authority.isEmpty() && !authority.equals(host)) {
        p.add(where + ": authority " + authority + " is not the Service host " + host);
      }
    } else {
      p.add(where + ": cluster " + cluster + " is neither a CLUSTER patch of this file nor an Istio outbound cluster");
    }
  }

  static <T extends Message> T reparse(Message m, com.google.protobuf.Parser<T> parser) {
    try {
      return parser.parseFrom(m.toByteString());
    } catch (InvalidProtocolBufferException e) {
      throw new IllegalStateException(e);
    }
  }

  // ---- the shipped files ---------------------------------------------------------------------

  @Test
  void everyDocumentUnderIstioIsAnEnvoyFilter() {
    List<Manifests.Doc> all = istioObjects();
    assertThat(all).isNotEmpty();
    assertThat(all).allSatisfy(d -> assertThat(d.kind()).as(d.toString()).isEqualTo("EnvoyFilter"));
    int docs = ProjectFiles.yamlFiles("istio").stream().mapToInt(f -> YamlDocuments.read(f).size()).sum();
    assertThat(all).as("documents without a kind under istio/").hasSize(docs);
  }

  @Test
  void everyShippedEnvoyFilterFollowsTheRules() {
    for (Manifests.Doc d : envoyFilters()) {
      assertThat(problems(d.node())).as(d.toString()).isEmpty();
    }
  }

  @Test
  void shippedVariantsAreTheSidecarTheCentralServiceAndTheGateway() {
    Set<String> reached = new HashSet<>();
    for (Manifests.Doc d : envoyFilters()) {
      for (JsonNode patch : d.node().path("spec").path("configPatches")) {
        if (patch.path("applyTo").asText().equals("HTTP_FILTER")) {
          reached.add(patch.path("match").path("context").asText() + " "
              + patch.at("/patch/value/typed_config/grpc_service/envoy_grpc/cluster_name").asText());
        }
      }
    }
    String central = Manifests.istioOutboundCluster(Manifests.CENTRAL_SERVICE, Manifests.centralGrpcPort());
    assertThat(reached).contains(
        "SIDECAR_OUTBOUND disagg_usage_extproc", "SIDECAR_OUTBOUND " + central, "GATEWAY " + central);
  }

  /** The EnvoyFilters calling the edge guard's Service. */
  static List<Manifests.Doc> edgeGuardFilters() {
    String guard = Manifests.istioOutboundCluster(Manifests.EDGE_GUARD_SERVICE, Manifests.edgeGuardGrpcPort());
    return envoyFilters().stream()
        .filter(d -> d.node().findValuesAsText("cluster_name").contains(guard)).toList();
  }

  /**
   * The edge guard ships for a client-facing gateway: its own Gateway, never one a usage filter patches
   * (istio/gateway.yaml's, which carries the orchestrator's calls to the workers), never a sidecar.
   */
  @Test
  void theEdgeGuardShipsForAClientGatewayThatNoUsageFilterPatches() {
    List<Manifests.Doc> guards = edgeGuardFilters();
    assertThat(guards).hasSize(1);
    Manifests.Doc guard = guards.get(0);
    assertThat(problems(guard.node())).as(guard.toString()).isEmpty();
    assertThat(guard.node().at("/spec/targetRefs")).singleElement()
        .satisfies(t -> assertThat(t.path("kind").asText()).isEqualTo("Gateway"));
    Set<String> usageGateways = new HashSet<>();
    for (Manifests.Doc d : envoyFilters()) {
      if (!guards.contains(d)) {
        d.node().at("/spec/targetRefs").forEach(t -> usageGateways.add(t.path("name").asText()));
      }
    }
    assertThat(usageGateways).as("gateways the usage filters patch").isNotEmpty()
        .doesNotContain(guard.node().at("/spec/targetRefs/0/name").asText());
    assertThat(guard.node().findValuesAsText("context")).containsOnly("GATEWAY");
  }

  @Test
  void checkerHoldsTheEdgeGuardToTheEdgeBootstrap() {
    ObjectNode responses = copy("disagg-usage-edge-guard");
    ((ObjectNode) extProcConfig(responses).path("processing_mode")).put("response_header_mode", "SEND");
    Problems.assertEachNamed(problems(responses), "processing_mode must be the edge bootstrap's");

    ObjectNode usageBaseline = copy("disagg-usage-edge-guard");
    extProcConfig(usageBaseline).put("message_timeout", "0.2s");
    extProcConfig(usageBaseline).putArray("request_attributes").add("xds.cluster_name");
    Problems.assertEachNamed(problems(usageBaseline), "message_timeout must be the edge bootstrap's",
        "reads no attributes");

    ObjectNode sidecar = copy("disagg-usage-edge-guard");
    ((ObjectNode) sidecar.path("spec")).remove("targetRefs");
    ((ObjectNode) sidecar.path("spec")).putObject("workloadSelector").putObject("labels").put("app", "x");
    ((ObjectNode) httpFilterPatch(sidecar).path("match")).put("context", "SIDECAR_OUTBOUND");
    Problems.assertEachNamed(problems(sidecar), "belongs on a client-facing gateway");

    ObjectNode sameName = copy("disagg-usage-edge-guard");
    ((ObjectNode) httpFilterPatch(sameName).path("patch").path("value")).put("name", USAGE_FILTER_NAME);
    Problems.assertEachNamed(problems(sameName), "a name of its own");

    // The usage filter pointed at the guard is held to the guard's rules, not passed as a usage filter.
    ObjectNode usageAtGuard = copy("disagg-usage-extproc-gateway");
    envoyGrpc(usageAtGuard).put("cluster_name",
        Manifests.istioOutboundCluster(Manifests.EDGE_GUARD_SERVICE, Manifests.edgeGuardGrpcPort()));
    assertThat(problems(usageAtGuard)).isNotEmpty();
  }

  /** The gateway path needs the request-id fix for vLLM and llm-d: it ships, for the very Gateway gateway.yaml patches. */
  @Test
  void theRequestIdFixShipsForTheGatewayOfTheGatewayFilter() {
    JsonNode gateway = copy("disagg-usage-extproc-gateway");
    ObjectNode fix = copy("disagg-usage-request-id-gateway");
    assertThat(fix.at("/spec/targetRefs")).isEqualTo(gateway.at("/spec/targetRefs"));
    assertThat(fix.at("/metadata/namespace")).isEqualTo(gateway.at("/metadata/namespace"));
    assertThat(fix.at("/spec/configPatches").findValuesAsText("preserve_external_request_id")).containsExactly("true");
  }

  @Test
  void checkerRejectsARequestIdFixThatDoesMoreOrLessOrElsewhere() {
    ObjectNode more = copy("disagg-usage-request-id-gateway");
    ((ObjectNode) more.at("/spec/configPatches/0/patch/value/typed_config")).put("use_remote_address", false);
    Problems.assertEachNamed(problems(more), "sets more than preserve_external_request_id");

    ObjectNode off = copy("disagg-usage-request-id-gateway");
    ((ObjectNode) off.at("/spec/configPatches/0/patch/value/typed_config")).put("preserve_external_request_id", false);
    Problems.assertEachNamed(problems(off), "must be true");

    ObjectNode typo = copy("disagg-usage-request-id-gateway");
    ((ObjectNode) typo.at("/spec/configPatches/0/patch/value/typed_config")).put("preserve_external_requestid", true);
    Problems.assertEachNamed(problems(typo), "preserve_external_requestid");

    ObjectNode sidecar = copy("disagg-usage-request-id-gateway");
    ObjectNode patch = (ObjectNode) sidecar.at("/spec/configPatches/0");
    ((ObjectNode) patch.path("match")).put("context", "SIDECAR_OUTBOUND");
    ((ObjectNode) patch.path("patch")).put("operation", "REPLACE");
    ((ObjectNode) sidecar.path("spec")).remove("targetRefs");
    ((ObjectNode) sidecar.path("spec")).putObject("workloadSelector").putObject("labels").put("app", "x");
    Problems.assertEachNamed(problems(sidecar), "GATEWAY context", "MERGE", "targetRefs");

    ObjectNode together = copy("disagg-usage-extproc-gateway");
    ((com.fasterxml.jackson.databind.node.ArrayNode) together.at("/spec/configPatches"))
        .add(copy("disagg-usage-request-id-gateway").at("/spec/configPatches/0"));
    Problems.assertEachNamed(problems(together), "file of its own");
  }

  @Test
  void centralServicePortIsNamedForIstioProtocolSelectionWhenShipped() {
    String central = Manifests.istioOutboundCluster(Manifests.CENTRAL_SERVICE, Manifests.centralGrpcPort());
    assertThat(envoyFilters().stream().map(d -> d.node().toString()))
        .anySatisfy(text -> assertThat(text).contains(central));
    Manifests.service(Manifests.CENTRAL_SERVICE).ifPresent(svc -> {
      JsonNode grpc = null;
      for (JsonNode port : svc.path("spec").path("ports")) {
        if (port.path("port").asInt() == Manifests.centralGrpcPort()) {
          grpc = port;
        }
      }
      assertThat(grpc).as("central Service port " + Manifests.centralGrpcPort()).isNotNull();
      // Without either, Istio's cluster speaks HTTP/1.1 and gRPC fails.
      assertThat(grpc.path("name").asText().equals("grpc") || grpc.path("name").asText().startsWith("grpc-")
          || grpc.path("appProtocol").asText().equals("grpc")).isTrue();
    });
  }

  @Test
  void readmeDocumentsTheClusterNamesForClassification() throws IOException {
    String readme = Files.readString(ProjectFiles.resolve("istio/README.md"));
    for (String worker : Manifests.WORKER_SERVICES) {
      assertThat(readme).contains(Manifests.istioOutboundCluster(worker, Manifests.workerPort()));
    }
    assertThat(readme).contains("classification.context_clusters").contains("classification.generation_clusters");
    Matcher m = Pattern.compile("outbound\\|(\\d+)\\|[^|\\s]*\\|([a-z0-9.-]+)").matcher(readme);
    int found = 0;
    while (m.find()) {
      found++;
      int port = Integer.parseInt(m.group(1));
      String host = m.group(2);
      if (host.startsWith(Manifests.CENTRAL_SERVICE + ".")) {
        assertThat(port).as(m.group()).isEqualTo(Manifests.centralGrpcPort());
      } else if (Manifests.WORKER_SERVICES.stream().anyMatch(w -> host.startsWith(w + "."))) {
        assertThat(port).as(m.group()).isEqualTo(Manifests.workerPort());
      }
      assertThat(host).as(m.group()).endsWith("." + Manifests.NAMESPACE + ".svc.cluster.local");
    }
    assertThat(found).isGreaterThanOrEqualTo(3);
  }

  @Test
  void typedStructWrappingOfTheShippedConfigResolvesToTheSameFilter() throws Exception {
    // istiod older than a field we use cannot parse typed_config; README shows the TypedStruct wrapper.
    JsonNode config = envoyFilters().get(0).node().at("/spec/configPatches").findValue("typed_config");
    ObjectNode value = ((ObjectNode) config.deepCopy());
    String typeUrl = value.remove("@type").asText();
    ObjectNode wrapped = YamlDocuments.JSON.createObjectNode();
    wrapped.put("@type", "type.googleapis.com/udpa.type.v1.TypedStruct");
    wrapped.put("type_url", typeUrl);
    wrapped.set("value", value);
    ObjectNode filterJson = YamlDocuments.JSON.createObjectNode();
    filterJson.put("name", "envoy.filters.http.ext_proc.disagg_usage");
    filterJson.set("typed_config", wrapped);
    HttpFilter filter = reparse(EnvoyProtos.parse(filterJson, HttpFilter.getDescriptor()), HttpFilter.parser());
    assertThat(filter.getTypedConfig().getTypeUrl()).endsWith("udpa.type.v1.TypedStruct");
    ExternalProcessor viaStruct = reparse(EnvoyProtos.unpack(filter.getTypedConfig()), ExternalProcessor.parser());
    ExternalProcessor direct =
        reparse(EnvoyProtos.unpack(EnvoyProtos.parse(config, Any.newBuilder()).build()), ExternalProcessor.parser());
    assertThat(viaStruct).isEqualTo(direct);
    assertThat(ExtProcBaseline.violations(viaStruct)).isEmpty();
    // A typo inside the struct is still caught when the struct is re-parsed.
    value.put("failure_mode_alow", true);
    HttpFilter bad = reparse(EnvoyProtos.parse(filterJson, HttpFilter.getDescriptor()), HttpFilter.parser());
    org.assertj.core.api.Assertions.assertThatThrownBy(() -> EnvoyProtos.unpack(bad.getTypedConfig()))
        .hasMessageContaining("failure_mode_alow");
  }

  // ---- the checker catches what it claims to -------------------------------------------------

  static ObjectNode copy(String name) {
    return (ObjectNode) envoyFilters().stream().filter(d -> d.name().equals(name)).findFirst().orElseThrow()
        .node().deepCopy();
  }

  static ObjectNode httpFilterPatch(ObjectNode filter) {
    for (JsonNode patch : filter.path("spec").path("configPatches")) {
      if (patch.path("applyTo").asText().equals("HTTP_FILTER")) {
        return (ObjectNode) patch;
      }
    }
    throw new IllegalStateException("no HTTP_FILTER patch");
  }

  static ObjectNode extProcConfig(ObjectNode filter) {
    return (ObjectNode) httpFilterPatch(filter).at("/patch/value/typed_config");
  }

  static ObjectNode envoyGrpc(ObjectNode filter) {
    return (ObjectNode) extProcConfig(filter).at("/grpc_service/envoy_grpc");
  }

  @Test
  void checkerRejectsAMissingAuthorityOnAnIstioClusterName() {
    ObjectNode f = copy("disagg-usage-extproc-central");
    envoyGrpc(f).remove("authority");
    Problems.assertEachNamed(problems(f), "authority");
  }

  @Test
  void checkerRejectsUnknownClustersAndTheWrongServicePort() {
    ObjectNode f = copy("disagg-usage-extproc-central");
    envoyGrpc(f).put("cluster_name", "outbound|9003||disagg-usage-extproc.llm.svc.cluster.local");
    Problems.assertEachNamed(problems(f), "not the central Service's gRPC port");
    ObjectNode g = copy("disagg-usage-extproc-sidecar");
    envoyGrpc(g).put("cluster_name", "extproc_local");
    Problems.assertEachNamed(problems(g), "neither a CLUSTER patch");
  }

  @Test
  void checkerRejectsBothSelectionsAndNoSelection() {
    ObjectNode both = copy("disagg-usage-extproc-gateway");
    ((ObjectNode) both.path("spec")).putObject("workloadSelector").putObject("labels").put("app", "x");
    assertThat(problems(both)).contains("only one of targetRefs or workloadSelector can be set");
    ObjectNode none = copy("disagg-usage-extproc-central");
    ((ObjectNode) none.path("spec")).remove("workloadSelector");
    Problems.assertEachNamed(problems(none), "one of workloadSelector or targetRefs");
  }

  @Test
  void checkerRejectsTyposDeprecatedFieldsAndBaselineDepartures() {
    ObjectNode typo = copy("disagg-usage-extproc-sidecar");
    extProcConfig(typo).put("failure_mode_alow", true);
    Problems.assertEachNamed(problems(typo), "failure_mode_alow");

    ObjectNode deprecated = copy("disagg-usage-extproc-sidecar");
    ((ObjectNode) deprecated.at("/spec/configPatches/0/patch/value")).putObject("http2_protocol_options");
    assertThat(problems(deprecated)).anySatisfy(s -> assertThat(s).contains("deprecated field").contains("http2_protocol_options"));

    ObjectNode failClosed = copy("disagg-usage-extproc-sidecar");
    extProcConfig(failClosed).put("failure_mode_allow", false);
    ((ObjectNode) extProcConfig(failClosed).path("processing_mode")).put("response_body_mode", "STREAMED");
    Problems.assertEachNamed(problems(failClosed), "failure_mode_allow", "response_body_mode");
  }

  @Test
  void checkerRejectsTheWrongPortAndPlacement() {
    ObjectNode port = copy("disagg-usage-extproc-sidecar");
    ((ObjectNode) httpFilterPatch(port).at("/match/listener")).put("portNumber", 8080);
    Problems.assertEachNamed(problems(port), "portNumber");

    ObjectNode after = copy("disagg-usage-extproc-central");
    ((ObjectNode) httpFilterPatch(after).path("patch")).put("operation", "INSERT_AFTER");
    ((ObjectNode) httpFilterPatch(after).at("/match/listener/filterChain/filter/subFilter")).put("name", "envoy.filters.http.cors");
    Problems.assertEachNamed(problems(after), "INSERT_BEFORE", "subFilter");
  }

  @Test
  void checkerRejectsAWeakHandMadeCluster() {
    ObjectNode f = copy("disagg-usage-extproc-sidecar");
    ObjectNode cluster = (ObjectNode) f.at("/spec/configPatches/0/patch/value");
    cluster.remove("typed_extension_protocol_options");
    cluster.remove("circuit_breakers");
    cluster.remove("health_checks");
    cluster.put("name", "outbound|9002||local");
    Problems.assertEachNamed(problems(f), "HTTP/2", "circuit breakers", "gRPC health check", "free of '|'");
  }
}
