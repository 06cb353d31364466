package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.testkit.RealEnvoy;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Envoy Gateway's own translation of deploy/envoy-gateway/ ({@code egctl x translate}, v1.9.0 as
 * scripts/install-test-tools pins it), beside a cluster's Gateway, the route the policies target and
 * its Services (test resource envoy-gateway/cluster.yaml) and, for the central policy, the Service the
 * central overlay renders: every object accepted, the generated listener carries the ext_proc filter
 * as the policy says, and the whole translated configuration passes {@code envoy --mode validate} of
 * each pinned Envoy release.
 */
class EgctlTranslateTest {
  @TempDir Path dir;

  static Stream<String> policyFiles() {
    return ProjectFiles.yamlFiles(EnvoyGatewayPolicyTest.DIR).stream().map(ProjectFiles::relative);
  }

  static Stream<Arguments> policyFilesAndReleases() {
    return policyFiles().flatMap(f -> EnvoyBinaries.releases().stream().map(r -> Arguments.of(f, r)));
  }

  /**
   * The cluster fixture and {@code policyFile}; when that file holds no EnvoyExtensionPolicy (the
   * request-id fix, the EnvoyPatchPolicy, the access log), the central policy it completes; the central
   * Service when a policy calls it; and the GatewayClass referencing the file's EnvoyProxy, as
   * access-log.yaml and the sidecar file tell the operator to.
   */
  Path input(String policyFile) throws IOException {
    List<String> files = new ArrayList<>(List.of(policyFile));
    if (!Files.readString(ProjectFiles.resolve(policyFile)).contains("kind: EnvoyExtensionPolicy\n")) {
      files.add(CENTRAL_POLICY);
    }
    return input(files);
  }

  static final String CENTRAL_POLICY = EnvoyGatewayPolicyTest.DIR + "/extension-policy.yaml";

  Path input(List<String> policyFiles) throws IOException {
    List<JsonNode> shipped = new ArrayList<>();
    for (String f : policyFiles) {
      shipped.addAll(YamlDocuments.read(ProjectFiles.resolve(f)));
    }
    StringBuilder yaml = new StringBuilder();
    for (JsonNode doc : YamlDocuments.read(ProjectFiles.resolve(CLUSTER))) {
      ObjectNode copy = doc.deepCopy();
      for (JsonNode proxy : shipped) {
        if (copy.path("kind").asText().equals("GatewayClass") && proxy.path("kind").asText().equals("EnvoyProxy")) {
          ((ObjectNode) copy.path("spec")).putObject("parametersRef").put("group", "gateway.envoyproxy.io")
              .put("kind", "EnvoyProxy").put("name", proxy.at("/metadata/name").asText())
              .put("namespace", proxy.at("/metadata/namespace").asText());
        }
      }
      String written = YamlDocuments.YAML.writeValueAsString(copy);
      yaml.append(written.startsWith("---") ? "" : "---\n").append(written);
    }
    for (String f : policyFiles) {
      yaml.append("\n---\n").append(Files.readString(ProjectFiles.resolve(f)));
    }
    boolean callsTheService = false;
    for (String f : policyFiles) {
      callsTheService |= Files.readString(ProjectFiles.resolve(f)).contains("kind: Service\n");
    }
    if (callsTheService) {
      Path central = ProjectFiles.resolve(KubernetesManifests.OVERLAYS + "/central");
      for (KubernetesManifests.Source s : KubernetesManifests.renderedSources(central)) {
        if (s.typeKey().equals("v1/Service") && s.node().at("/metadata/name").asText().equals("disagg-usage-extproc")) {
          ObjectNode service = s.node().deepCopy();
          ((ObjectNode) service.path("spec")).put("clusterIP", "10.0.0.20"); // as the API server assigns one
          yaml.append("\n---\n").append(YamlDocuments.YAML.writeValueAsString(service));
        }
      }
    }
    boolean callsTheEdgeGuard = false;
    for (String f : policyFiles) {
      callsTheEdgeGuard |= Files.readString(ProjectFiles.resolve(f)).contains("name: " + Manifests.EDGE_GUARD_SERVICE + "\n");
    }
    if (callsTheEdgeGuard) {
      yaml.append("\n---\n").append(Files.readString(ProjectFiles.resolve(CLIENT_ROUTE)));
      Path guard = ProjectFiles.resolve(KubernetesManifests.OVERLAYS + "/edge-guard");
      for (KubernetesManifests.Source s : KubernetesManifests.renderedSources(guard)) {
        if (s.typeKey().equals("v1/Service") && s.node().at("/metadata/name").asText().equals(Manifests.EDGE_GUARD_SERVICE)) {
          ObjectNode service = s.node().deepCopy();
          ((ObjectNode) service.path("spec")).put("clusterIP", "10.0.0.21");
          yaml.append("\n---\n").append(YamlDocuments.YAML.writeValueAsString(service));
        }
      }
    }
    Path file = dir.resolve("input.yaml");
    Files.writeString(file, yaml);
    return file;
  }

  static final String CLUSTER = "deploy-validation/src/test/resources/envoy-gateway/cluster.yaml";
  /** The client-facing HTTPRoute llm-api (on the workers' Gateway, another host) and the orchestrator's Service. */
  static final String CLIENT_ROUTE = "deploy-validation/src/test/resources/envoy-gateway/client-route.yaml";
  static final String EDGE_GUARD_POLICY = EnvoyGatewayPolicyTest.DIR + "/edge-guard-policy.yaml";

  @ParameterizedTest(name = "{0}")
  @MethodSource("policyFiles")
  void envoyGatewayAcceptsEveryObject(String policyFile) throws IOException {
    GoTools.Run run = GoTools.run(GoTools.EGCTL, List.of("x", "translate", "--to", "gateway-api", "-o", "json",
        "-f", input(policyFile).toString()));
    assertThat(run.exitCode()).as(run.output()).isZero();
    JsonNode statuses = YamlDocuments.JSON.readTree(run.stdout());
    List<String> conditions = new ArrayList<>();
    collectConditions(statuses, "", conditions);
    assertThat(conditions).as("status conditions").isNotEmpty()
        .allSatisfy(c -> assertThat(c).as(c).doesNotContain("status=False"));
    assertThat(conditions).as("the policy").anyMatch(c -> c.contains("Accepted status=True") && c.contains("Policy"));
  }

  @ParameterizedTest(name = "{0} on Envoy {1}")
  @MethodSource("policyFilesAndReleases")
  void theTranslatedConfigurationPassesEnvoysValidateMode(String policyFile, String release) throws Exception {
    GoTools.Run run = GoTools.run(GoTools.EGCTL, List.of("x", "translate", "--to", "xds", "-o", "json",
        "-f", input(policyFile).toString()));
    assertThat(run.exitCode()).as(run.output()).isZero();
    ObjectNode bootstrap = XdsDumpBootstrap.of(YamlDocuments.JSON.readTree(run.stdout()));
    String text = YamlDocuments.JSON.writeValueAsString(bootstrap);
    assertThat(text).as("the ext_proc filter the policy asks for")
        .contains("\"name\":\"envoy.filters.http.ext_proc/envoyextensionpolicy/llm/")
        .contains("\"failureModeAllow\":true").contains("\"allowModeOverride\":true");
    Path file = dir.resolve("bootstrap.json");
    Files.writeString(file, text);
    RealEnvoy.Verdict verdict = RealEnvoy.validate(EnvoyBinaries.locate(release), file);
    assertThat(verdict.accepted()).as(verdict.output()).isTrue();
  }

  /** egctl's xDS for {@code files} beside the fixture, as a tree. */
  JsonNode translate(List<String> files) throws IOException {
    GoTools.Run run = GoTools.run(GoTools.EGCTL, List.of("x", "translate", "--to", "xds", "-o", "json",
        "-f", input(files).toString()));
    assertThat(run.exitCode()).as(run.output()).isZero();
    return YamlDocuments.JSON.readTree(run.stdout());
  }

  /** The ext_proc filters of the translated listeners (whatever Envoy Gateway named them). */
  static List<JsonNode> extProcFilters(JsonNode xds) {
    List<JsonNode> filters = new ArrayList<>();
    for (JsonNode list : xds.findValues("httpFilters")) {
      list.forEach(f -> {
        if (f.path("name").asText().startsWith("envoy.filters.http.ext_proc")) {
          filters.add(f.path("typedConfig"));
        }
      });
    }
    return filters;
  }

  /** The usage service's EnvoyExtensionPolicies (the worker route's), not the edge guard's. */
  static Stream<String> extensionPolicyFiles() {
    return policyFiles().filter(f -> !f.equals(EDGE_GUARD_POLICY)).filter(f -> {
      try {
        return Files.readString(ProjectFiles.resolve(f)).contains("kind: EnvoyExtensionPolicy\n");
      } catch (IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
    });
  }

  /**
   * The EnvoyPatchPolicy, with either shipped EnvoyExtensionPolicy, reaches its filter in Envoy Gateway's
   * own translation: max_message_timeout and the xds.cluster_name attribute are on it, message_timeout
   * is the policy's. (The live test shows the same with the File provider's other filter name.)
   */
  @ParameterizedTest(name = "{0}")
  @MethodSource("extensionPolicyFiles")
  void thePatchPolicyReachesTheFilterOfEachPolicy(String policyFile) throws IOException {
    JsonNode xds = translate(List.of(EnvoyGatewayPolicyTest.DIR + "/envoy-patch-policy.yaml", policyFile));
    List<JsonNode> filters = extProcFilters(xds);
    assertThat(filters).hasSize(1);
    assertThat(filters.get(0).path("maxMessageTimeout").asText()).isEqualTo("3s");
    assertThat(filters.get(0).path("requestAttributes").toString()).isEqualTo("[\"xds.cluster_name\"]");
    assertThat(filters.get(0).path("messageTimeout").asText()).isEqualTo("0.200s");
  }

  /** The named ext_proc filters of the translated listeners, by name. */
  static java.util.Map<String, JsonNode> extProcFiltersByName(JsonNode xds) {
    java.util.Map<String, JsonNode> filters = new java.util.TreeMap<>();
    for (JsonNode list : xds.findValues("httpFilters")) {
      list.forEach(f -> {
        if (f.path("name").asText().startsWith("envoy.filters.http.ext_proc")) {
          filters.put(f.path("name").asText(), f.path("typedConfig"));
        }
      });
    }
    return filters;
  }

  /** A translated ExternalProcessor (JSON with its {@code @type}) as Envoy's own message. */
  static ExternalProcessor externalProcessor(JsonNode typedConfig) throws IOException {
    ObjectNode copy = typedConfig.deepCopy();
    copy.remove("@type");
    ExternalProcessor.Builder b = ExternalProcessor.newBuilder();
    com.google.protobuf.util.JsonFormat.parser().merge(YamlDocuments.JSON.writeValueAsString(copy), b);
    return b.build();
  }

  /**
   * The edge guard's policy beside the usage service's, in Envoy Gateway's own translation: the guard's
   * filter has the processing settings of deploy/envoy/edge-guard/envoy.yaml (request headers only until
   * the guard turns a body on, responses never sent, allow_mode_override, fail-open, 1 s per message),
   * writes no metadata, is enabled on the client route's routes only (the usage filter on the worker
   * route's only), and calls the guard's Service over HTTP/2 with the gRPC health check.
   */
  @Test
  void theEdgeGuardPolicyPutsTheEdgeBootstrapsFilterOnTheClientRouteOnly() throws Exception {
    JsonNode xds = translate(List.of(EDGE_GUARD_POLICY, CENTRAL_POLICY));
    java.util.Map<String, JsonNode> filters = extProcFiltersByName(xds);
    String guardName = "envoy.filters.http.ext_proc/envoyextensionpolicy/llm/disagg-usage-edge-guard/extproc/0";
    String usageName = "envoy.filters.http.ext_proc/envoyextensionpolicy/llm/disagg-usage-extproc/extproc/0";
    assertThat(filters).containsOnlyKeys(guardName, usageName);

    ExternalProcessor guard = externalProcessor(filters.get(guardName));
    ExternalProcessor shipped = EdgeGuardBootstrapTest.edgeFilter(EdgeGuardBootstrapTest.bootstrap());
    assertThat(guard.getProcessingMode()).as("processing mode = deploy/envoy/edge-guard/envoy.yaml's")
        .isEqualTo(shipped.getProcessingMode());
    assertThat(guard.getAllowModeOverride()).isEqualTo(shipped.getAllowModeOverride()).isTrue();
    assertThat(guard.getFailureModeAllow()).isEqualTo(shipped.getFailureModeAllow()).isTrue();
    assertThat(guard.getMessageTimeout()).isEqualTo(shipped.getMessageTimeout());
    assertThat(guard.hasMetadataOptions()).as("the guard writes no metadata").isFalse();
    assertThat(guard.getRequestAttributesList()).isEmpty();

    // Enabled per route: the guard on the client route, the usage service on the worker route, never crossed.
    int clientRoutes = 0;
    int workerRoutes = 0;
    for (JsonNode route : xds.findParents("typedPerFilterConfig")) {
      String name = route.path("name").asText();
      java.util.Set<String> enabled = new java.util.TreeSet<>();
      route.path("typedPerFilterConfig").fieldNames().forEachRemaining(enabled::add);
      if (name.startsWith("httproute/llm/" + Manifests.CLIENT_ROUTE + "/")) {
        clientRoutes++;
        assertThat(enabled).as(name).contains(guardName).doesNotContain(usageName);
      } else if (name.startsWith("httproute/llm/disagg-workers/")) {
        workerRoutes++;
        assertThat(enabled).as(name).contains(usageName).doesNotContain(guardName);
      }
    }
    assertThat(clientRoutes).as("routes of " + Manifests.CLIENT_ROUTE).isPositive();
    assertThat(workerRoutes).as("routes of disagg-workers").isPositive();
    // One listener carries both routes: both filters are listed there disabled, each enabled per route.
    for (JsonNode list : xds.findValues("httpFilters")) {
      list.forEach(f -> {
        if (f.path("name").asText().equals(guardName)) {
          assertThat(f.path("disabled").asBoolean(false)).as("listed disabled, enabled per route").isTrue();
        }
      });
    }

    String cluster = guard.getGrpcService().getEnvoyGrpc().getClusterName();
    JsonNode c = xds.findParents("connectTimeout").stream().filter(n -> n.path("name").asText().equals(cluster))
        .findFirst().orElseThrow(() -> new AssertionError("no cluster " + cluster));
    assertThat(c.toString()).as("HTTP/2 to the guard").contains("http2ProtocolOptions");
    assertThat(c.at("/healthChecks/0/grpcHealthCheck/serviceName").asText())
        .isEqualTo("envoy.service.ext_proc.v3.ExternalProcessor");
    assertThat(c.at("/healthChecks/0/interval").asText()).isEqualTo("2s");
    assertThat(c.at("/outlierDetection/consecutiveLocalOriginFailure").asInt()).isEqualTo(3);
    assertThat(c.at("/circuitBreakers/thresholds/0/maxRequests").asInt()).isEqualTo(100000);
    assertThat(xds.toString()).as("the guard's endpoint is its Service's port")
        .contains("\"portValue\":" + Manifests.edgeGuardGrpcPort());
  }

  /**
   * The EnvoyPatchPolicy selects the usage service's filter by its writable metadata namespace: beside the
   * edge guard's policy it still lands on the usage filter and leaves the guard's alone.
   */
  @Test
  void thePatchPolicyLeavesTheEdgeGuardsFilterAlone() throws Exception {
    JsonNode xds = translate(List.of(EnvoyGatewayPolicyTest.DIR + "/envoy-patch-policy.yaml", EDGE_GUARD_POLICY, CENTRAL_POLICY));
    java.util.Map<String, JsonNode> filters = extProcFiltersByName(xds);
    assertThat(filters).hasSize(2);
    filters.forEach((name, f) -> {
      if (name.contains("/disagg-usage-edge-guard/")) {
        assertThat(f.has("maxMessageTimeout")).as(name).isFalse();
        assertThat(f.has("requestAttributes")).as(name).isFalse();
        assertThat(f.path("messageTimeout").asText()).isEqualTo("1s");
      } else {
        assertThat(f.path("maxMessageTimeout").asText()).as(name).isEqualTo("3s");
      }
    });
  }

  /**
   * Envoy Gateway's listener treats its callers as external and, without the request-id fix, replaces
   * their x-request-id; with it, keeps it.
   */
  @Test
  void theRequestIdFixMakesTheListenerKeepTheCallersId() throws IOException {
    JsonNode without = translate(List.of(CENTRAL_POLICY)).findParents("httpFilters").stream()
        .filter(hcm -> hcm.path("statPrefix").asText().startsWith("http-")).findFirst().orElseThrow();
    assertThat(without.path("useRemoteAddress").asBoolean(false)).isTrue();
    assertThat(without.path("preserveExternalRequestId").asBoolean(false)).isFalse();
    JsonNode with = translate(List.of(EnvoyGatewayPolicyTest.DIR + "/request-id.yaml", CENTRAL_POLICY)).findParents("httpFilters")
        .stream().filter(hcm -> hcm.path("statPrefix").asText().startsWith("http-")).findFirst().orElseThrow();
    assertThat(with.path("useRemoteAddress").asBoolean(false)).isTrue();
    assertThat(with.path("preserveExternalRequestId").asBoolean(false)).isTrue();
    assertThat(with.path("generateRequestId").asBoolean(false)).as("an id is still made when the caller sends none").isTrue();
  }

  /** The GatewayClass referencing a shipped EnvoyProxy puts its access log, with the service's metadata, on the listener. */
  @Test
  void theAccessLogEnvoyProxyReachesTheListener() throws IOException {
    String xds = translate(List.of(EnvoyGatewayPolicyTest.DIR + "/access-log.yaml", CENTRAL_POLICY)).toString();
    assertThat(xds).contains("%DYNAMIC_METADATA(disagg_usage:outcome)%").contains("%DYNAMIC_METADATA(disagg_usage:cached_tokens)%");
    assertThat(translate(List.of(CENTRAL_POLICY)).toString()).as("Envoy Gateway's default access log")
        .doesNotContain("DYNAMIC_METADATA(disagg_usage");
  }

  /** The status check has teeth: the central policy without the Service it calls is not accepted. */
  @Test
  void aPolicyWhoseServiceIsMissingIsReported() throws IOException {
    Path file = dir.resolve("no-service.yaml");
    Files.writeString(file, Files.readString(ProjectFiles.resolve(CLUSTER))
        + "\n---\n" + Files.readString(ProjectFiles.resolve(EnvoyGatewayPolicyTest.DIR + "/extension-policy.yaml")));
    GoTools.Run run = GoTools.run(GoTools.EGCTL, List.of("x", "translate", "--to", "gateway-api", "-o", "json",
        "-f", file.toString()));
    List<String> conditions = new ArrayList<>();
    collectConditions(YamlDocuments.JSON.readTree(run.stdout()), "", conditions);
    assertThat(conditions).anyMatch(c -> c.startsWith("EnvoyExtensionPolicy/") && c.contains("status=False"));
  }

  @Test
  void theInstalledEgctlIsThePinnedRelease() throws IOException {
    assertThat(GoTools.version(GoTools.EGCTL)).isEqualTo("v1.9.0");
    assertThat(Files.readString(ProjectFiles.resolve(EnvoyBinaries.INSTALLER))).contains("egctl_version=v1.9.0\n");
  }

  /** "kind/name type status=..." for every condition in egctl's status output. */
  private static void collectConditions(JsonNode node, String where, List<String> out) {
    if (node.isObject()) {
      String here = node.has("kind") ? node.path("kind").asText() + "/" + node.at("/metadata/name").asText() : where;
      for (JsonNode condition : node.path("conditions")) {
        out.add(here + " " + condition.path("type").asText() + " status=" + condition.path("status").asText()
            + " (" + condition.path("message").asText() + ")");
      }
      node.fields().forEachRemaining(e -> {
        if (!e.getKey().equals("conditions")) {
          collectConditions(e.getValue(), here, out);
        }
      });
    } else if (node.isArray()) {
      node.elements().forEachRemaining(e -> collectConditions(e, where, out));
    }
  }
}
