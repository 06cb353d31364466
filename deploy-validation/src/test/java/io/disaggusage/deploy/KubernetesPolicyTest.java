package io.disaggusage.deploy;

import static io.disaggusage.deploy.KubernetesPolicies.DEFAULT_ADMIN_PORT;
import static io.disaggusage.deploy.KubernetesPolicies.DEFAULT_GRPC_PORT;
import static io.disaggusage.deploy.KubernetesPolicies.EXT_PROC_SERVICE;
import static io.disaggusage.deploy.KubernetesPolicies.LONGEST_GENERATION_SECONDS;
import static io.disaggusage.deploy.KubernetesPolicies.effectivePort;
import static io.disaggusage.deploy.KubernetesPolicies.env;
import static io.disaggusage.deploy.KubernetesPolicies.matches;
import static io.disaggusage.deploy.KubernetesPolicies.namedPort;
import static io.disaggusage.deploy.KubernetesPolicies.parse;
import static io.disaggusage.deploy.KubernetesPolicies.probePort;
import static io.disaggusage.deploy.KubernetesPolicies.probes;
import static io.disaggusage.deploy.KubernetesPolicies.resolve;
import static io.disaggusage.deploy.KubernetesPolicies.unknownConfigKeys;
import static io.disaggusage.deploy.KubernetesPolicies.volume;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.fabric8.kubernetes.api.model.Capabilities;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerPort;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.LabelSelector;
import io.fabric8.kubernetes.api.model.PodSecurityContext;
import io.fabric8.kubernetes.api.model.Probe;
import io.fabric8.kubernetes.api.model.SecurityContext;
import io.fabric8.kubernetes.api.model.TopologySpreadConstraint;
import io.fabric8.kubernetes.api.model.Volume;
import io.fabric8.kubernetes.api.model.VolumeMount;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.apps.StatefulSet;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Set;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The project's policies for each pod template of its Kubernetes manifests (the raw files, every rendered
 * overlay and every rendered Helm variant), and for the service's config files as the kustomizations ship
 * them. {@link KubernetesOverlayPolicyTest} holds the objects of each rendered overlay to each other.
 */
class KubernetesPolicyTest {
  /** Every pod template: from the raw files, each rendered overlay and each rendered Helm variant. */
  static Stream<Arguments> allWorkloads() {
    List<KubernetesManifests.Source> sources = new ArrayList<>(KubernetesManifests.rawObjects());
    for (KubernetesManifests.Rendering rendering : KubernetesManifests.renderings()) {
      sources.addAll(rendering.sources());
    }
    return Workload.in(KubernetesManifests.typedAll(sources)).stream().map(Arguments::of);
  }

  static Stream<Arguments> extProcWorkloads() {
    return allWorkloads().filter(a -> ((Workload) a.get()[0]).extProc().isPresent());
  }

  static Stream<Arguments> centralExtProcWorkloads() {
    return extProcWorkloads().filter(a -> !((Workload) a.get()[0]).extProcSharesAnLlmPod());
  }

  static Stream<Arguments> inPodExtProcWorkloads() {
    return extProcWorkloads().filter(a -> ((Workload) a.get()[0]).extProcSharesAnLlmPod());
  }

  // ---------------------------------------------------------------- per pod template

  @Test
  void thereArePodTemplatesToCheck() {
    assertThat(allWorkloads().count()).as("raw workloads: central, Redis, sidecar router").isGreaterThanOrEqualTo(3);
    assertThat(centralExtProcWorkloads().count()).as("workloads with a central extproc").isGreaterThanOrEqualTo(1);
    assertThat(inPodExtProcWorkloads().count()).as("workloads with extproc beside an orchestrator").isGreaterThanOrEqualTo(1);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("allWorkloads")
  void everyContainerHasProbesResourcesAndARestrictedSecurityContext(Workload w) {
    // except the probes of an extproc container in a pod that carries LLM traffic: see below
    PodSecurityContext podSecurity = Optional.ofNullable(w.pod().getSecurityContext()).orElseGet(PodSecurityContext::new);
    assertThat(w.pod().getAutomountServiceAccountToken()).as(w + " automountServiceAccountToken").isFalse();
    assertThat(w.containers()).isNotEmpty();
    w.containers().forEach(c -> {
      String what = w + " container " + c.getName();
      if (!(Workload.isExtProc(c) && w.extProcSharesAnLlmPod())) {
        assertThat(c.getReadinessProbe()).as(what + " readinessProbe").isNotNull();
        assertThat(c.getLivenessProbe()).as(what + " livenessProbe").isNotNull();
      }
      assertThat(c.getResources()).as(what + " resources").isNotNull();
      assertThat(c.getResources().getRequests()).as(what + " requests").containsKeys("cpu", "memory");
      assertThat(c.getResources().getLimits()).as(what + " limits").containsKey("memory");
      // an exact release (x.y.z in the tag) or a digest; the placeholders users replace are exempt
      if (!c.getImage().startsWith("registry.example/")) {
        assertThat(c.getImage()).as(what + " image is pinned to a release").matches(".*(:v?\\d+\\.\\d+\\.\\d+[^:/]*|@sha256:[0-9a-f]{64})");
      }

      SecurityContext sc = c.getSecurityContext();
      assertThat(sc).as(what + " securityContext").isNotNull();
      Boolean nonRoot = sc.getRunAsNonRoot() != null ? sc.getRunAsNonRoot() : podSecurity.getRunAsNonRoot();
      assertThat(nonRoot).as(what + " runAsNonRoot").isTrue();
      assertThat(sc.getReadOnlyRootFilesystem()).as(what + " readOnlyRootFilesystem").isTrue();
      assertThat(sc.getAllowPrivilegeEscalation()).as(what + " allowPrivilegeEscalation").isFalse();
      assertThat(sc.getPrivileged()).as(what + " privileged").isNotEqualTo(Boolean.TRUE);
      Capabilities caps = sc.getCapabilities();
      assertThat(caps).as(what + " capabilities").isNotNull();
      assertThat(caps.getDrop()).as(what + " capabilities.drop").contains("ALL");
      assertThat(caps.getAdd()).as(what + " capabilities.add").isEmpty();
      String seccomp = sc.getSeccompProfile() != null ? sc.getSeccompProfile().getType()
          : podSecurity.getSeccompProfile() != null ? podSecurity.getSeccompProfile().getType() : null;
      assertThat(seccomp).as(what + " seccompProfile").isEqualTo("RuntimeDefault");
    });
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("allWorkloads")
  void probesTargetDeclaredContainerPorts(Workload w) {
    w.containers().forEach(c -> {
      Map<String, Integer> ports = new HashMap<>();
      for (ContainerPort p : c.getPorts()) {
        ports.put(String.valueOf(p.getContainerPort()), p.getContainerPort());
        if (p.getName() != null) {
          ports.put(p.getName(), p.getContainerPort());
        }
      }
      for (Probe probe : probes(c)) {
        Optional<Integer> port = probePort(probe, ports);
        if (probe.getExec() == null) {
          assertThat(port).as(w + " container " + c.getName() + " probe port is one of its container ports").isPresent();
        }
      }
    });
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("allWorkloads")
  void initContainersAreNativeSidecars(Workload w) {
    // Plain init containers may not have probes; ours are all long-running sidecars. A startup probe
    // gates the next container: every sidecar the orchestrator needs (Envoy) has one, extproc none.
    for (Container c : w.pod().getInitContainers()) {
      assertThat(c.getRestartPolicy()).as(w + " init container " + c.getName() + " restartPolicy").isEqualTo("Always");
      if (!Workload.isExtProc(c)) {
        assertThat(c.getStartupProbe()).as(w + " native sidecar " + c.getName() + " startupProbe (gates the next container)")
            .isNotNull();
      }
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("extProcWorkloads")
  void extProcContainerRunsTheShippedImageWithAWritableTmpAndDrains(Workload w) {
    Container c = w.extProc().orElseThrow();
    assertThat(c.getImage()).isEqualTo(KubernetesManifests.EXTPROC_IMAGE);
    VolumeMount tmp = c.getVolumeMounts().stream().filter(m -> m.getMountPath().equals("/tmp")).findFirst()
        .orElseThrow(() -> new AssertionError(w + ": no volume at /tmp"));
    Volume volume = volume(w, tmp.getName());
    assertThat(volume.getEmptyDir()).as(w + " /tmp is an emptyDir").isNotNull();
    assertThat(env(c, "JAVA_TOOL_OPTIONS")).as(w + " JAVA_TOOL_OPTIONS").contains("-XX:+PerfDisableSharedMem");
    assertThat(w.pod().getTerminationGracePeriodSeconds()).as(w + " terminationGracePeriodSeconds")
        .isGreaterThanOrEqualTo(LONGEST_GENERATION_SECONDS);
  }

  /** A central pod carries no LLM traffic: its probes take only it out, and Envoy then fails open. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("centralExtProcWorkloads")
  void centralExtProcProbesGrpcHealthOnItsGrpcPort(Workload w) {
    Container c = w.extProc().orElseThrow();
    int grpc = namedPort(c, "grpc");
    int admin = namedPort(c, "http-metrics");
    assertThat(c.getReadinessProbe().getGrpc()).as(w + " readiness via gRPC health").isNotNull();
    assertThat(c.getReadinessProbe().getGrpc().getPort()).isEqualTo(grpc);
    assertThat(c.getLivenessProbe().getGrpc()).as(w + " liveness via gRPC health").isNotNull();
    assertThat(c.getLivenessProbe().getGrpc().getPort()).isEqualTo(grpc);
    for (Probe p : probes(c)) {
      if (p.getGrpc() != null) {
        // The service answers for "" and for the ext_proc service name only.
        assertThat(Objects.requireNonNullElse(p.getGrpc().getService(), "")).isIn("", EXT_PROC_SERVICE);
      }
    }
    Probe startup = c.getStartupProbe();
    assertThat(startup).as(w + " startupProbe").isNotNull();
    assertThat(startup.getHttpGet()).as(w + " startupProbe is GET /healthz").isNotNull();
    assertThat(startup.getHttpGet().getPath()).isEqualTo("/healthz");
    assertThat(resolve(startup.getHttpGet().getPort(), w.ports())).contains(admin);
    assertThat(env(c, "JAVA_TOOL_OPTIONS")).as(w + " JAVA_TOOL_OPTIONS: heap from the limit")
        .contains("-XX:MaxRAMPercentage=75");
  }

  /**
   * Nothing of the service may keep a pod that carries LLM traffic from starting or take it out of its
   * Service: no probes (a native sidecar's startup probe gates the next container, its readiness counts
   * toward the pod's, a failing liveness probe restarts it into back-off, which is unready too), and a bad
   * config idles instead of exiting into a crash loop. Its memory settings are the benchmarked ones.
   */
  @ParameterizedTest(name = "{0}")
  @MethodSource("inPodExtProcWorkloads")
  void extProcBesideAnOrchestratorCannotMakeThePodUnready(Workload w) {
    Container c = w.extProc().orElseThrow();
    assertThat(c.getStartupProbe()).as(w + " extproc startupProbe").isNull();
    assertThat(c.getReadinessProbe()).as(w + " extproc readinessProbe").isNull();
    assertThat(c.getLivenessProbe()).as(w + " extproc livenessProbe").isNull();
    assertThat(env(c, "DISAGG_USAGE_ON_STARTUP_FAILURE")).as(w + " idles on a bad config").isEqualTo("idle");
    assertThat(env(c, "JAVA_TOOL_OPTIONS")).as(w + " JAVA_TOOL_OPTIONS: the benchmarked heap and direct memory")
        .contains("-Xmx256m").contains("-XX:MaxDirectMemorySize=128m");
  }

  /** /readyz is 503 while Redis is down: as a probe it would take replicas out for what they survive. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("allWorkloads")
  void noProbeAsksReadyz(Workload w) {
    w.containers().forEach(c -> {
      for (Probe p : probes(c)) {
        if (p.getHttpGet() != null) {
          assertThat(p.getHttpGet().getPath()).as(w + " container " + c.getName() + " probe path").isNotEqualTo("/readyz");
        }
      }
    });
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("extProcWorkloads")
  void extProcIsANativeSidecarBesideAnOrchestratorOrTheOnlyContainerOfAReplicatedDeployment(Workload w) {
    boolean sidecar = w.pod().getInitContainers().stream()
        .anyMatch(c -> c.getName().equals(KubernetesManifests.EXTPROC_CONTAINER));
    if (sidecar) {
      Container c = w.extProc().get();
      assertThat(c.getRestartPolicy()).isEqualTo("Always");
      assertThat(w.pod().getContainers()).as(w + " main containers").isNotEmpty()
          .noneSatisfy(m -> assertThat(m.getName()).isEqualTo(KubernetesManifests.EXTPROC_CONTAINER));
      // ext_proc starts first (and so stops last) among the sidecars.
      assertThat(w.pod().getInitContainers().get(0).getName()).isEqualTo(KubernetesManifests.EXTPROC_CONTAINER);
    } else {
      assertThat(w.pod().getContainers()).extracting(Container::getName)
          .containsExactly(KubernetesManifests.EXTPROC_CONTAINER);
      assertThat(w.replicas()).as(w + " central replicas").isGreaterThanOrEqualTo(2);
      assertThat(w.pod().getTopologySpreadConstraints()).as(w + " spread over nodes").isNotEmpty();
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("allWorkloads")
  void topologySpreadSelectsTheWorkloadsOwnPods(Workload w) {
    for (TopologySpreadConstraint t : w.pod().getTopologySpreadConstraints()) {
      assertThat(matches(t.getLabelSelector(), w.podLabels())).as(w + " " + t.getTopologyKey()).isTrue();
    }
    LabelSelector selector = w.object() instanceof Deployment d ? d.getSpec().getSelector()
        : ((StatefulSet) w.object()).getSpec().getSelector();
    assertThat(matches(selector, w.podLabels())).as(w + " selector matches its template").isTrue();
  }

  // ---------------------------------------------------------------- the config files, without rendering

  /** Every config.yaml a kustomization turns into the service's ConfigMap. */
  static Stream<Path> serviceConfigFiles() {
    List<Path> out = new ArrayList<>();
    for (Path file : ProjectFiles.yamlFiles(KubernetesManifests.DIR)) {
      if (!file.getFileName().toString().equals("kustomization.yaml")) {
        continue;
      }
      for (JsonNode generator : YamlDocuments.single(file).path("configMapGenerator")) {
        if (Set.of("disagg-usage-extproc-config", "disagg-usage-edge-guard-config").contains(generator.path("name").asText())) {
          generator.path("files").forEach(f -> out.add(file.getParent().resolve(f.asText()).normalize()));
        }
      }
    }
    return out.stream();
  }

  @Test
  void everyOverlayWithItsOwnConfigIsFound() {
    assertThat(serviceConfigFiles().map(ProjectFiles::relative)).containsExactlyInAnyOrder(
        "deploy/kubernetes/base/config.yaml",
        "deploy/kubernetes/overlays/central/config.yaml",
        "deploy/kubernetes/overlays/central-external-redis/config.yaml",
        "deploy/kubernetes/overlays/pod-local/config.yaml",
        "deploy/kubernetes/components/edge-guard/config.yaml");
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("serviceConfigFiles")
  void serviceConfigUsesOnlyKnownKeysAndTheShippedPorts(Path file) {
    JsonNode config = YamlDocuments.single(file);
    assertThat(unknownConfigKeys(config)).as(ProjectFiles.relative(file)).isEmpty();
    assertThat(config.path("store").path("type").asText("memory")).isIn("memory", "redis");
    int grpc = config.path("grpc").path("port").asInt(DEFAULT_GRPC_PORT);
    int admin = config.path("admin").path("port").asInt(DEFAULT_ADMIN_PORT);
    List<Container> extProcs = Workload.in(KubernetesManifests.typedAll(KubernetesManifests.rawObjects())).stream()
        .flatMap(w -> w.extProc().stream()).toList();
    assertThat(extProcs).hasSizeGreaterThanOrEqualTo(2);
    for (Container c : extProcs) {
      assertThat(namedPort(c, "grpc")).isEqualTo(grpc);
      assertThat(namedPort(c, "http-metrics")).isEqualTo(admin);
    }
  }

  @Test
  void configKeyCheckCatchesMisspelledAndMisplacedKeys() {
    JsonNode config = parse("""
        grpc: {port: 9002}
        store: {tyep: redis, redis_uri: "redis://r:6379"}
        ttl: 60s
        classification: {context_clusters: [a, b]}
        """);
    assertThat(unknownConfigKeys(config)).containsExactlyInAnyOrder("store.tyep", "ttl");
  }

  @Test
  void effectivePortFollowsFlagsThenEnvironmentThenFileThenDefault() {
    JsonNode file = parse("grpc: {port: 7000}");
    Container c = new Container();
    assertThat(effectivePort(c, parse("{}"), "grpc.port", "--grpc-port", DEFAULT_GRPC_PORT)).isEqualTo(9002);
    assertThat(effectivePort(c, file, "grpc.port", "--grpc-port", DEFAULT_GRPC_PORT)).isEqualTo(7000);
    c.setEnv(List.of(new EnvVar("DISAGG_USAGE_GRPC_PORT", "7100", null)));
    assertThat(effectivePort(c, file, "grpc.port", "--grpc-port", DEFAULT_GRPC_PORT)).isEqualTo(7100);
    c.setArgs(List.of("--set", "grpc.port=7200"));
    assertThat(effectivePort(c, file, "grpc.port", "--grpc-port", DEFAULT_GRPC_PORT)).isEqualTo(7200);
    c.setArgs(List.of("--set", "grpc.port=7200", "--grpc-port=7300"));
    assertThat(effectivePort(c, file, "grpc.port", "--grpc-port", DEFAULT_GRPC_PORT)).isEqualTo(7300);
  }
}
