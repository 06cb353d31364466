package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerPort;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicy;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyIngressRule;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * The pod-local overlay (deploy/kubernetes/overlays/pod-local) wires what the pod-local bootstraps
 * assume: each worker pod mounts its role's bootstrap, declares its listener, runs its engine on the
 * port Envoy forwards to and closes that port to other pods; the service classifies by the clusters the
 * bootstraps name and is reached at the address they call; llm-d's pd-sidecar sends the decode leg to
 * the Envoy. Generic policies (probes, security, selectors, ports) apply to this overlay as to the others
 * in KubernetesPolicyTest and KubernetesOverlayPolicyTest.
 */
class PodLocalManifestTest {
  static final Path OVERLAY = ProjectFiles.resolve(KubernetesManifests.OVERLAYS + "/pod-local");
  static final String EXT_PROC_HEADLESS = "disagg-usage-extproc-headless";
  static final String EXT_PROC_HEADLESS_DNS = EXT_PROC_HEADLESS + "." + Manifests.NAMESPACE + ".svc.cluster.local";
  /** Worker workload → the bootstrap its Envoy runs. */
  static final Map<String, String> WORKERS = Map.of(
      "sglang-prefill", "prefill.yaml", "sglang-decode", "decode.yaml", "llm-d-decode", "decode.yaml");

  static RenderedOverlay render() {
    return RenderedOverlay.of(OVERLAY);
  }

  static Container container(Workload w, String name) {
    return w.containers().filter(c -> c.getName().equals(name)).findFirst()
        .orElseThrow(() -> new AssertionError(w + " has no container " + name));
  }

  static JsonNode envoyBootstrap(RenderedOverlay r, Workload w) {
    Container envoy = container(w, "envoy");
    List<String> args = envoy.getArgs();
    String path = args.get(args.indexOf("--config-path") + 1);
    assertThat(Path.of(path).getFileName().toString()).as(w + " runs its role's bootstrap").isEqualTo(WORKERS.get(w.name()));
    return KubernetesPolicies.parse(KubernetesPolicies.mountedFile(w, envoy, path, r.configMaps()));
  }

  static int listenerPort(JsonNode bootstrap) {
    return bootstrap.at("/static_resources/listeners/0/address/socket_address/port_value").asInt();
  }

  static JsonNode cluster(JsonNode bootstrap, String name) {
    for (JsonNode c : bootstrap.at("/static_resources/clusters")) {
      if (c.path("name").asText().equals(name)) {
        return c;
      }
    }
    throw new AssertionError("no cluster " + name);
  }

  static JsonNode endpoint(JsonNode cluster) {
    return cluster.at("/load_assignment/endpoints/0/lb_endpoints/0/endpoint/address/socket_address");
  }

  @Test
  void bootstrapConfigMapHoldsTheShippedFilesByteForByte() throws Exception {
    ConfigMap envoy = render().configMaps().values().stream()
        .filter(c -> c.getMetadata().getName().startsWith("disagg-usage-envoy-pod-local-")).findFirst().orElseThrow();
    for (String file : List.of("prefill.yaml", "decode.yaml")) {
      assertThat(envoy.getData().get(file)).as(file)
          .isEqualTo(Files.readString(ProjectFiles.resolve("deploy/envoy/pod-local/" + file)));
    }
  }

  @Test
  void everyWorkerPodRunsItsRolesEnvoyAsANativeSidecarInFrontOfItsEngine() {
    RenderedOverlay r = render();
    WORKERS.keySet().forEach(name -> {
      Workload w = r.workload(name);
      JsonNode bootstrap = envoyBootstrap(r, w);
      Container envoy = container(w, "envoy");
      assertThat(w.pod().getInitContainers().get(0)).as(w + " starts Envoy first").isEqualTo(envoy);
      assertThat(envoy.getPorts()).extracting(ContainerPort::getContainerPort).contains(listenerPort(bootstrap));
      String engineCluster = bootstrap.at("/static_resources/listeners/0/filter_chains/0/filters/0/typed_config"
          + "/route_config/virtual_hosts/0/routes/0/route/cluster").asText();
      int enginePort = endpoint(cluster(bootstrap, engineCluster)).path("port_value").asInt();
      Container engine = w.pod().getContainers().get(0);
      assertThat(KubernetesPolicies.namedPort(engine, "engine")).as(w + " engine port").isEqualTo(enginePort);
      assertThat(engine.getArgs()).as(w + " engine --port").containsSubsequence("--port", String.valueOf(enginePort));
      assertThat(w.podLabels()).as(w + " may call the service").containsEntry("disagg-usage/extproc-client", "true");
      assertThat(openPorts(r, w)).as(w + " NetworkPolicy keeps the engine behind Envoy").isNotEmpty()
          .doesNotContain(enginePort);
    });
  }

  @Test
  void theServiceClassifiesByTheBootstrapsClustersAndIsWhereTheyCallIt() {
    RenderedOverlay r = render();
    Workload central = r.extProcWorkload();
    JsonNode config = KubernetesPolicies.mountedConfig(central, central.extProc().get(), r.configMaps());
    JsonNode prefill = envoyBootstrap(r, r.workload("sglang-prefill"));
    JsonNode decode = envoyBootstrap(r, r.workload("sglang-decode"));
    assertThat(config.at("/classification/context_clusters").toString()).isEqualTo("[\"prefill_local\"]");
    assertThat(config.at("/classification/generation_clusters").toString()).isEqualTo("[\"decode_local\"]");
    cluster(prefill, "prefill_local");
    cluster(decode, "decode_local");
    assertThat(config.at("/store/type").asText()).as("two Envoys per request, replicas share the store")
        .isEqualTo("redis");

    Service headless = r.byName(Service.class).get(EXT_PROC_HEADLESS);
    assertThat(headless.getSpec().getClusterIP()).isEqualTo("None");
    assertThat(headless.getMetadata().getNamespace()).isEqualTo(Manifests.NAMESPACE);
    int grpc = headless.getSpec().getPorts().stream().filter(p -> p.getName().equals("grpc")).findFirst()
        .orElseThrow().getPort();
    for (JsonNode bootstrap : List.of(prefill, decode)) {
      JsonNode address = endpoint(cluster(bootstrap, "disagg_usage_extproc"));
      assertThat(address.path("address").asText()).isEqualTo(EXT_PROC_HEADLESS_DNS);
      assertThat(address.path("port_value").asInt()).isEqualTo(grpc);
    }
  }

  /**
   * pd-sidecar v0.7.1 sends the decode leg to {@code localhost:--vllm-port} (no host flag), so the Envoy
   * listener must accept loopback connections; its connector flag is {@code --kv-connector}
   * ({@code --connector} is deprecated) and it serves TLS unless {@code --secure-proxy=false}
   * (docs/deploy.md, "llm-d pd-sidecar v0.7.1"; e2e LlmdSidecarTest runs these flags).
   */
  @Test
  void llmDPdSidecarSendsTheDecodeLegToTheEnvoyAndServesThePoolPort() {
    RenderedOverlay r = render();
    Workload w = r.workload("llm-d-decode");
    Container sidecar = container(w, "pd-sidecar");
    JsonNode bootstrap = envoyBootstrap(r, w);
    int envoyPort = listenerPort(bootstrap);
    assertThat(bootstrap.at("/static_resources/listeners/0/address/socket_address/address").asText())
        .as("reachable at the pod's localhost").isIn("0.0.0.0", "127.0.0.1");
    assertThat(sidecar.getArgs()).contains("--vllm-port=" + envoyPort, "--kv-connector=nixlv2", "--secure-proxy=false");
    assertThat(sidecar.getArgs()).noneMatch(arg -> arg.startsWith("--connector"));
    int served = KubernetesPolicies.namedPort(sidecar, "http");
    assertThat(sidecar.getArgs()).contains("--port=" + served);
    assertThat(openPorts(r, w)).containsExactly(served);
  }

  @Test
  void sglangPrefillOpensItsBootstrapPortAndTheRouterAddressesPodsByName() {
    RenderedOverlay r = render();
    Workload w = r.workload("sglang-prefill");
    Container engine = container(w, "sglang");
    int bootstrapPort = KubernetesPolicies.namedPort(engine, "kv-bootstrap");
    assertThat(engine.getArgs()).containsSubsequence("--disaggregation-bootstrap-port", String.valueOf(bootstrapPort));
    assertThat(openPorts(r, w)).containsExactlyInAnyOrder(listenerPort(envoyBootstrap(r, w)), bootstrapPort);
    for (String name : List.of("sglang-prefill", "sglang-decode")) {
      Service service = r.byName(Service.class).get(name);
      assertThat(service.getSpec().getClusterIP()).as(name + ": per-pod DNS names").isEqualTo("None");
      var set = (io.fabric8.kubernetes.api.model.apps.StatefulSet) r.workload(name).object();
      assertThat(set.getSpec().getServiceName()).isEqualTo(name);
    }
  }

  /** The ports the NetworkPolicies selecting {@code w} open to other pods. */
  static List<Integer> openPorts(RenderedOverlay r, Workload w) {
    return r.byName(NetworkPolicy.class).values().stream()
        .filter(np -> KubernetesPolicies.matches(np.getSpec().getPodSelector(), w.podLabels()))
        .flatMap(np -> np.getSpec().getIngress().stream())
        .flatMap((NetworkPolicyIngressRule rule) -> rule.getPorts().stream())
        .map(p -> KubernetesPolicies.resolve(p.getPort(), w.ports()))
        .flatMap(Optional::stream)
        .toList();
  }
}
