package io.disaggusage.deploy;

import static io.disaggusage.deploy.KubernetesPolicies.DEFAULT_ADMIN_PORT;
import static io.disaggusage.deploy.KubernetesPolicies.DEFAULT_GRPC_PORT;
import static io.disaggusage.deploy.KubernetesPolicies.ISTIO_PORTS;
import static io.disaggusage.deploy.KubernetesPolicies.effectivePort;
import static io.disaggusage.deploy.KubernetesPolicies.matches;
import static io.disaggusage.deploy.KubernetesPolicies.mountedConfig;
import static io.disaggusage.deploy.KubernetesPolicies.mountedFile;
import static io.disaggusage.deploy.KubernetesPolicies.namedPort;
import static io.disaggusage.deploy.KubernetesPolicies.probes;
import static io.disaggusage.deploy.KubernetesPolicies.resolve;
import static io.disaggusage.deploy.KubernetesPolicies.templateAnnotations;
import static io.disaggusage.deploy.KubernetesPolicies.unknownConfigKeys;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.IntOrString;
import io.fabric8.kubernetes.api.model.Probe;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.ServicePort;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicy;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyEgressRule;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyIngressRule;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyPeer;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyPort;
import io.fabric8.kubernetes.api.model.policy.v1.PodDisruptionBudget;
import java.io.IOException;
import java.net.URI;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The project's policies across the objects of each rendered Kubernetes overlay and Helm variant: what
 * Services, PodDisruptionBudgets and NetworkPolicies select, the ports they open, the service's config as
 * its pod mounts it. {@link KubernetesPolicyTest} checks each pod template on its own.
 */
class KubernetesOverlayPolicyTest {
  /** Every kustomize overlay and every Helm variant, rendered. */
  static Stream<KubernetesManifests.Rendering> overlays() {
    return KubernetesManifests.renderings().stream();
  }

  static Stream<KubernetesManifests.Rendering> centralOverlays() {
    return overlays().filter(KubernetesManifests.Rendering::central);
  }

  @Test
  void thereAreCentralOverlaysToCheck() {
    assertThat(centralOverlays().count()).isGreaterThanOrEqualTo(1);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("overlays")
  void servicesSelectExactlyOneWorkloadAndTargetItsNamedPorts(KubernetesManifests.Rendering overlay) {
    RenderedOverlay rendered = RenderedOverlay.of(overlay);
    rendered.present(Service.class).forEach((name, s) -> {
      Map<String, String> selector = s.getSpec().getSelector();
      assertThat(selector).as("Service " + name + " selector").isNotEmpty();
      List<Workload> selected = rendered.selectedBy(selector);
      assertThat(selected).as("Service " + name + " selects exactly one workload").hasSize(1);
      Map<String, Integer> ports = selected.get(0).ports();
      for (ServicePort p : s.getSpec().getPorts()) {
        IntOrString target = p.getTargetPort();
        assertThat(target).as("Service " + name + " port " + p.getName() + " targetPort").isNotNull();
        assertThat(target.getStrVal()).as("Service " + name + " port " + p.getName() + " targets a named port")
            .isNotNull();
        assertThat(ports).as("Service " + name + " targetPort " + target.getStrVal()).containsKey(target.getStrVal());
        assertThat(p.getPort()).as("Service " + name + " port = target port").isEqualTo(ports.get(target.getStrVal()));
        if ("grpc".equals(p.getName())) {
          assertThat(p.getAppProtocol()).as("Service " + name + " grpc appProtocol").isEqualTo("grpc");
        }
      }
    });
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("overlays")
  void podDisruptionBudgetsSelectAReplicatedWorkload(KubernetesManifests.Rendering overlay) {
    RenderedOverlay rendered = RenderedOverlay.of(overlay);
    var pdbs = rendered.byName(PodDisruptionBudget.class);
    for (var e : pdbs.entrySet()) {
      List<Workload> selected = rendered.selectedBy(e.getValue().getSpec().getSelector());
      assertThat(selected).as("PDB " + e.getKey() + " selects exactly one workload").hasSize(1);
      assertThat(selected.get(0).replicas()).as("PDB " + e.getKey() + " workload replicas").isGreaterThanOrEqualTo(2);
      // An unready replica serves nothing; a node drain may always evict it.
      assertThat(e.getValue().getSpec().getUnhealthyPodEvictionPolicy()).as("PDB " + e.getKey() + " unhealthyPodEvictionPolicy")
          .isEqualTo("AlwaysAllow");
    }
    // Every replicated extproc Deployment is protected by a PDB.
    for (Workload w : rendered.workloads()) {
      if (w.extProc().isPresent() && w.replicas() >= 2) {
        assertThat(pdbs.values()).as(w + " has a PDB")
            .anySatisfy(p -> assertThat(matches(p.getSpec().getSelector(), w.podLabels())).isTrue());
      }
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("overlays")
  void networkPoliciesOpenOnlyDeclaredContainerPorts(KubernetesManifests.Rendering overlay) {
    RenderedOverlay rendered = RenderedOverlay.of(overlay);
    rendered.present(NetworkPolicy.class).forEach((name, np) -> {
      List<Workload> selected = rendered.selectedBy(np.getSpec().getPodSelector());
      assertThat(selected).as("NetworkPolicy " + name + " selects a workload").isNotEmpty();
      for (NetworkPolicyIngressRule rule : np.getSpec().getIngress()) {
        assertThat(rule.getPorts()).as("NetworkPolicy " + name + " ingress rules name their ports").isNotEmpty();
        for (NetworkPolicyPort p : rule.getPorts()) {
          if (p.getPort().getIntVal() != null && ISTIO_PORTS.contains(p.getPort().getIntVal())) {
            continue;
          }
          for (Workload w : selected) {
            assertThat(resolve(p.getPort(), w.ports())).as("NetworkPolicy " + name + " ingress port " + p.getPort()
                + " is a container port of " + w).isPresent();
          }
        }
      }
      for (NetworkPolicyEgressRule rule : np.getSpec().getEgress()) {
        for (NetworkPolicyPeer peer : rule.getTo()) {
          if (peer.getPodSelector() == null || peer.getNamespaceSelector() != null) {
            continue;
          }
          // A peer in this namespace: its pods must exist here and listen on the ports.
          List<Workload> peers = rendered.selectedBy(peer.getPodSelector());
          assertThat(peers).as("NetworkPolicy " + name + " egress peer " + peer.getPodSelector()).isNotEmpty();
          for (NetworkPolicyPort p : rule.getPorts()) {
            for (Workload w : peers) {
              assertThat(resolve(p.getPort(), w.ports())).as("NetworkPolicy " + name + " egress port " + p.getPort()
                  + " is a container port of " + w).isPresent();
            }
          }
        }
      }
    });
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("overlays")
  void extProcConfigIsMountedAtItsConfigPathAndAgreesWithPortsAndProbes(KubernetesManifests.Rendering overlay) {
    RenderedOverlay rendered = RenderedOverlay.of(overlay);
    List<Workload> withExtProc = rendered.workloads().stream().filter(w -> w.extProc().isPresent()).toList();
    assertThat(withExtProc).hasSize(1);
    Workload w = withExtProc.get(0);
    Container c = w.extProc().get();
    JsonNode config = mountedConfig(w, c, rendered.configMaps());

    assertThat(unknownConfigKeys(config)).as(w + " config.yaml keys").isEmpty();
    int grpc = effectivePort(c, config, "grpc.port", "--grpc-port", DEFAULT_GRPC_PORT);
    int admin = effectivePort(c, config, "admin.port", "--admin-port", DEFAULT_ADMIN_PORT);
    assertThat(namedPort(c, "grpc")).as(w + " containerPort grpc = grpc.port").isEqualTo(grpc);
    assertThat(namedPort(c, "http-metrics")).as(w + " containerPort http-metrics = admin.port").isEqualTo(admin);
    for (Probe p : probes(c)) {
      if (p.getGrpc() != null) {
        assertThat(p.getGrpc().getPort()).as(w + " gRPC probe port = grpc.port").isEqualTo(grpc);
      }
    }
    Map<String, String> annotations = Optional.ofNullable(templateAnnotations(w)).orElse(Map.of());
    if (annotations.containsKey("prometheus.io/port")) {
      assertThat(annotations.get("prometheus.io/port")).isEqualTo(String.valueOf(admin));
    }

    String store = config.path("store").path("type").asText("memory");
    boolean central = overlay.central();
    if (config.path("edge_guard").path("enabled").asBoolean()) {
      // The edge guard keeps no state (store.* is ignored): replicated like the central service, no Redis.
      assertThat(store).as("the edge guard connects no store").isEqualTo("memory");
      assertThat(w.replicas()).isGreaterThanOrEqualTo(2);
    } else if (central) {
      assertThat(store).as("central replicas share the store").isEqualTo("redis");
      assertThat(w.replicas()).isGreaterThanOrEqualTo(2);
    } else {
      assertThat(store).as("sidecar: one process sees both legs").isEqualTo("memory");
      assertThat(w.pod().getInitContainers()).contains(c);
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("centralOverlays")
  void centralNetworkPolicyAdmitsExtProcAndMetricsAndReachesTheStore(KubernetesManifests.Rendering overlay) {
    RenderedOverlay rendered = RenderedOverlay.of(overlay);
    Workload w = rendered.extProcWorkload();
    Container c = w.extProc().get();
    NetworkPolicy np = rendered.byName(NetworkPolicy.class).values().stream()
        .filter(p -> matches(p.getSpec().getPodSelector(), w.podLabels())).findFirst()
        .orElseThrow(() -> new AssertionError("no NetworkPolicy selects " + w));
    List<Integer> ingress = np.getSpec().getIngress().stream().flatMap(r -> r.getPorts().stream())
        .filter(p -> !ISTIO_PORTS.contains(p.getPort().getIntVal()))
        .map(p -> resolve(p.getPort(), w.ports()).orElseThrow()).toList();
    assertThat(ingress).containsExactlyInAnyOrder(namedPort(c, "grpc"), namedPort(c, "http-metrics"));
    assertThat(np.getSpec().getPolicyTypes()).contains("Ingress", "Egress");
    List<Integer> egress = np.getSpec().getEgress().stream().flatMap(r -> r.getPorts().stream())
        .map(p -> p.getPort().getIntVal()).toList();
    assertThatReachesDnsAnywhereAndIstiod(np, "NetworkPolicy " + np.getMetadata().getName());
    // The Envoys this project ships in the service's namespace (pod-local workers, the sidecar router,
    // istio/gateway.yaml's gateway) are admitted without a label: any pod of the namespace.
    NetworkPolicyIngressRule extProcRule = np.getSpec().getIngress().stream()
        .filter(r -> r.getPorts().stream().anyMatch(p -> resolve(p.getPort(), w.ports()).orElse(-1) == namedPort(c, "grpc")))
        .findFirst().orElseThrow();
    assertThat(extProcRule.getFrom()).as("ext_proc open to every pod of the namespace")
        .anySatisfy(peer -> {
          assertThat(peer.getNamespaceSelector()).isNull();
          assertThat(peer.getPodSelector()).isNotNull();
          assertThat(matches(peer.getPodSelector(), Map.of())).as("an empty pod selector").isTrue();
        });
    assertThat(extProcRule.getPorts()).extracting(p -> p.getPort().getIntVal()).as("Istio ambient's HBONE").contains(15008);

    JsonNode config = mountedConfig(w, c, rendered.configMaps());
    boolean uriFromSecret = c.getEnv().stream().anyMatch(e -> e.getName().equals("DISAGG_USAGE_STORE_REDIS_URI")
        && e.getValueFrom() != null && e.getValueFrom().getSecretKeyRef() != null);
    if (uriFromSecret) {
      assertThat(egress).as("Redis").contains(6379);
      return;
    }
    URI uri = URI.create(config.path("store").path("redis_uri").asText());
    assertThat(uri.getScheme()).isIn("redis", "rediss");
    Service redis = rendered.byName(Service.class).get(uri.getHost());
    assertThat(redis).as("store.redis_uri host " + uri.getHost() + " is a rendered Service").isNotNull();
    assertThat(redis.getSpec().getPorts()).extracting(ServicePort::getPort).contains(uri.getPort());
    assertThat(egress).contains(uri.getPort());
    // Redis accepts only the extproc pods.
    NetworkPolicy redisPolicy = rendered.byName(NetworkPolicy.class).values().stream()
        .filter(p -> matches(p.getSpec().getPodSelector(), redis.getSpec().getSelector()))
        .findFirst().orElseThrow(() -> new AssertionError("no NetworkPolicy for the Redis pods"));
    assertThat(redisPolicy.getSpec().getIngress()).allSatisfy(r -> assertThat(r.getFrom())
        .allSatisfy(from -> assertThat(matches(from.getPodSelector(), w.podLabels())).isTrue()));
    assertThatReachesDnsAnywhereAndIstiod(redisPolicy, "Redis NetworkPolicy");
    assertThat(redisPolicy.getSpec().getEgress()).flatExtracting(NetworkPolicyEgressRule::getPorts)
        .extracting(p -> p.getPort().getIntVal()).as("Redis opens no connection beyond DNS and istiod")
        .containsOnly(53, 15012);
  }

  /**
   * DNS without a destination (kube-dns, or NodeLocal DNSCache on a link-local address no selector
   * matches) and istiod's 15012, without which an injected Istio sidecar never becomes ready.
   */
  static void assertThatReachesDnsAnywhereAndIstiod(NetworkPolicy np, String what) {
    assertThat(np.getSpec().getEgress()).as(what + ": DNS, UDP and TCP, to any address").anySatisfy(r -> {
      assertThat(r.getTo()).isEmpty();
      assertThat(r.getPorts()).extracting(p -> p.getProtocol() + "/" + p.getPort().getIntVal())
          .containsExactlyInAnyOrder("UDP/53", "TCP/53");
    });
    assertThat(np.getSpec().getEgress()).as(what + ": istiod 15012").anySatisfy(r -> {
      assertThat(r.getPorts()).extracting(p -> p.getPort().getIntVal()).containsExactly(15012);
      assertThat(r.getTo()).singleElement().satisfies(peer -> {
        assertThat(peer.getNamespaceSelector().getMatchLabels()).containsEntry("kubernetes.io/metadata.name", "istio-system");
        assertThat(peer.getPodSelector().getMatchLabels()).containsEntry("app", "istiod");
      });
    });
  }

  /**
   * The Istio EnvoyFilters that call the central Service live in the namespace the central overlays
   * deploy it to, so the gateway pods they patch are admitted as pods of that namespace.
   */
  @ParameterizedTest(name = "{0}")
  @MethodSource("centralOverlays")
  void istioGatewayThatCallsTheCentralServiceIsInItsNamespace(KubernetesManifests.Rendering overlay) throws IOException {
    Workload w = RenderedOverlay.of(overlay).extProcWorkload();
    String namespace = w.object().getMetadata().getNamespace();
    for (String file : List.of("istio/gateway.yaml", "istio/central-service.yaml")) {
      for (JsonNode doc : YamlDocuments.read(ProjectFiles.resolve(file))) {
        assertThat(doc.at("/metadata/namespace").asText()).as(file + " " + doc.at("/metadata/name").asText())
            .isEqualTo(namespace);
      }
    }
  }

  @Test
  void sidecarEnvoyCallsExtProcOnLoopbackAndKnowsTheConfiguredClusters() throws Exception {
    RenderedOverlay rendered = RenderedOverlay.of(ProjectFiles.resolve(KubernetesManifests.OVERLAYS + "/sidecar"));
    Workload w = rendered.extProcWorkload();
    var configMaps = rendered.configMaps();
    Container extProc = w.extProc().get();
    JsonNode config = mountedConfig(w, extProc, configMaps);
    Container envoy = w.containers().filter(c -> c.getName().equals("envoy")).findFirst().orElseThrow();
    assertThat(w.pod().getInitContainers()).containsSubsequence(extProc, envoy);

    List<String> args = envoy.getArgs();
    String path = args.get(args.indexOf("--config-path") + 1);
    JsonNode bootstrap = YamlDocuments.YAML.readTree(mountedFile(w, envoy, path, configMaps));

    JsonNode clusters = bootstrap.path("static_resources").path("clusters");
    Map<String, JsonNode> byName = new LinkedHashMap<>();
    clusters.forEach(cl -> byName.put(cl.path("name").asText(), cl));
    JsonNode extProcFilter = null;
    for (JsonNode f : bootstrap.path("static_resources").path("listeners").get(0).path("filter_chains").get(0)
        .path("filters").get(0).path("typed_config").path("http_filters")) {
      if (f.path("name").asText().equals("envoy.filters.http.ext_proc")) {
        extProcFilter = f;
      }
    }
    assertThat(extProcFilter).isNotNull();
    String extProcCluster = extProcFilter.path("typed_config").path("grpc_service").path("envoy_grpc")
        .path("cluster_name").asText();
    JsonNode address = byName.get(extProcCluster).path("load_assignment").path("endpoints").get(0)
        .path("lb_endpoints").get(0).path("endpoint").path("address").path("socket_address");
    assertThat(address.path("address").asText()).isEqualTo("127.0.0.1");
    assertThat(address.path("port_value").asInt())
        .isEqualTo(effectivePort(extProc, config, "grpc.port", "--grpc-port", DEFAULT_GRPC_PORT));

    for (String key : List.of("context_clusters", "generation_clusters")) {
      JsonNode names = config.path("classification").path(key);
      assertThat(names.size()).as(key).isPositive();
      names.forEach(n -> assertThat(byName).as("classification." + key).containsKey(n.asText()));
    }
    // One listener per worker pool; the container declares each listener port.
    List<Integer> declared =
        envoy.getPorts().stream().map(io.fabric8.kubernetes.api.model.ContainerPort::getContainerPort).toList();
    JsonNode listeners = bootstrap.path("static_resources").path("listeners");
    assertThat(listeners.size()).isGreaterThanOrEqualTo(2);
    listeners.forEach(
        l -> assertThat(declared).contains(l.path("address").path("socket_address").path("port_value").asInt()));
  }
}
