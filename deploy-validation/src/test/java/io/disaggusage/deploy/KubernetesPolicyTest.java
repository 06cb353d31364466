package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.fabric8.kubernetes.api.model.Capabilities;
import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerPort;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.IntOrString;
import io.fabric8.kubernetes.api.model.LabelSelector;
import io.fabric8.kubernetes.api.model.LabelSelectorRequirement;
import io.fabric8.kubernetes.api.model.PodSecurityContext;
import io.fabric8.kubernetes.api.model.PodSpec;
import io.fabric8.kubernetes.api.model.Probe;
import io.fabric8.kubernetes.api.model.SecurityContext;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.ServicePort;
import io.fabric8.kubernetes.api.model.TopologySpreadConstraint;
import io.fabric8.kubernetes.api.model.Volume;
import io.fabric8.kubernetes.api.model.VolumeMount;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.apps.StatefulSet;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicy;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyEgressRule;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyIngressRule;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyPeer;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyPort;
import io.fabric8.kubernetes.api.model.policy.v1.PodDisruptionBudget;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The project's policies for its Kubernetes manifests: per pod template (raw files and every rendered
 * overlay) and across the objects of each rendered overlay (selectors, ports, the service's config).
 */
class KubernetesPolicyTest {
  /**
   * The service's configuration keys, read from docs/configuration.md's key table (which the server
   * module's ConfigurationDocTest keeps equal to the loader's key list).
   */
  static final Set<String> CONFIG_KEYS = documentedConfigKeys();

  static Set<String> documentedConfigKeys() {
    try {
      Set<String> keys = new java.util.TreeSet<>();
      java.util.regex.Matcher m =
          java.util.regex.Pattern.compile("(?m)^\\| `([a-z_]+(?:\\.[a-z_]+)+)` \\|")
              .matcher(java.nio.file.Files.readString(ProjectFiles.resolve("docs/configuration.md")));
      while (m.find()) {
        keys.add(m.group(1));
      }
      if (!keys.contains("grpc.port") || !keys.contains("store.type")) {
        throw new IllegalStateException("docs/configuration.md has no key table");
      }
      return Set.copyOf(keys);
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  /**
   * Ports an Istio data plane adds to a pod that no manifest declares: 15008, ambient's HBONE tunnel,
   * and 15020, where an injected sidecar serves the merged metrics Prometheus scrapes.
   */
  static final Set<Integer> ISTIO_PORTS = Set.of(15008, 15020);
  static final int DEFAULT_GRPC_PORT = 9002;
  static final int DEFAULT_ADMIN_PORT = 9090;
  static final String EXT_PROC_SERVICE = "envoy.service.ext_proc.v3.ExternalProcessor";
  /** The longest generation a pod must be able to finish when it is told to stop. */
  static final long LONGEST_GENERATION_SECONDS = 600;

  // ---------------------------------------------------------------- inputs

  /** A workload (Deployment/StatefulSet) with where it came from. */
  record Workload(String origin, HasMetadata object, PodSpec pod, Map<String, String> podLabels) {
    @Override
    public String toString() {
      return origin + " " + object.getKind() + " " + object.getMetadata().getName();
    }

    String name() {
      return object.getMetadata().getName();
    }

    int replicas() {
      Integer r = object instanceof Deployment d ? d.getSpec().getReplicas()
          : object instanceof StatefulSet s ? s.getSpec().getReplicas() : null;
      return r == null ? 1 : r;
    }

    Stream<Container> containers() {
      return Stream.concat(pod.getInitContainers().stream(), pod.getContainers().stream());
    }

    Optional<Container> extProc() {
      return containers().filter(c -> c.getName().equals(KubernetesManifests.EXTPROC_CONTAINER)).findFirst();
    }

    /**
     * The service shares this pod with containers that carry LLM traffic (an orchestrator and its Envoy),
     * rather than running in a central pod of its own.
     */
    boolean extProcSharesAnLlmPod() {
      return extProc().isPresent() && containers().anyMatch(c -> !isExtProc(c));
    }

    /** Every container port by name, and by number under its number. */
    Map<String, Integer> ports() {
      Map<String, Integer> out = new HashMap<>();
      containers().flatMap(c -> c.getPorts().stream()).forEach(p -> {
        if (p.getName() != null) {
          out.put(p.getName(), p.getContainerPort());
        }
        out.put(String.valueOf(p.getContainerPort()), p.getContainerPort());
      });
      return out;
    }
  }

  static List<Workload> workloads(List<KubernetesManifests.Typed> objects) {
    List<Workload> out = new ArrayList<>();
    for (KubernetesManifests.Typed t : objects) {
      KubernetesManifests.podTemplate(t.object()).ifPresent(p ->
          out.add(new Workload(t.origin(), t.object(), p.getSpec(), p.getMetadata().getLabels())));
    }
    return out;
  }

  /** Every pod template: from the raw files, each rendered overlay and each rendered Helm variant. */
  static Stream<Arguments> allWorkloads() {
    List<KubernetesManifests.Source> sources = new ArrayList<>(KubernetesManifests.rawObjects());
    for (KubernetesManifests.Rendering rendering : KubernetesManifests.renderings()) {
      sources.addAll(rendering.sources());
    }
    return workloads(KubernetesManifests.typedAll(sources)).stream().map(Arguments::of);
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

  static boolean isExtProc(Container c) {
    return c.getName().equals(KubernetesManifests.EXTPROC_CONTAINER);
  }

  /** Every kustomize overlay and every Helm variant, rendered. */
  static Stream<KubernetesManifests.Rendering> overlays() {
    return KubernetesManifests.renderings().stream();
  }

  static Stream<KubernetesManifests.Rendering> centralOverlays() {
    return overlays().filter(KubernetesManifests.Rendering::central);
  }

  static List<KubernetesManifests.Typed> render(KubernetesManifests.Rendering overlay) {
    return KubernetesManifests.typedAll(overlay.sources());
  }

  static List<KubernetesManifests.Typed> render(Path overlay) {
    return KubernetesManifests.typedAll(KubernetesManifests.renderedSources(overlay));
  }

  // ---------------------------------------------------------------- per pod template

  @Test
  void thereArePodTemplatesToCheck() {
    assertThat(allWorkloads().count()).as("raw workloads: central, Redis, sidecar router").isGreaterThanOrEqualTo(3);
    assertThat(centralExtProcWorkloads().count()).as("workloads with a central extproc").isGreaterThanOrEqualTo(1);
    assertThat(inPodExtProcWorkloads().count()).as("workloads with extproc beside an orchestrator").isGreaterThanOrEqualTo(1);
    assertThat(centralOverlays().count()).isGreaterThanOrEqualTo(1);
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
      if (!(isExtProc(c) && w.extProcSharesAnLlmPod())) {
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
      if (!isExtProc(c)) {
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

  // ---------------------------------------------------------------- across the objects of an overlay

  @ParameterizedTest(name = "{0}")
  @MethodSource("overlays")
  void servicesSelectExactlyOneWorkloadAndTargetItsNamedPorts(KubernetesManifests.Rendering overlay) {
    List<KubernetesManifests.Typed> objects = render(overlay);
    List<Workload> workloads = workloads(objects);
    var services = KubernetesManifests.byName(objects, Service.class);
    assertThat(services).isNotEmpty();
    services.forEach((name, s) -> {
      Map<String, String> selector = s.getSpec().getSelector();
      assertThat(selector).as("Service " + name + " selector").isNotEmpty();
      List<Workload> selected = workloads.stream()
          .filter(w -> w.podLabels().entrySet().containsAll(selector.entrySet())).toList();
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
    List<KubernetesManifests.Typed> objects = render(overlay);
    List<Workload> workloads = workloads(objects);
    var pdbs = KubernetesManifests.byName(objects, PodDisruptionBudget.class);
    for (var e : pdbs.entrySet()) {
      List<Workload> selected =
          workloads.stream().filter(w -> matches(e.getValue().getSpec().getSelector(), w.podLabels())).toList();
      assertThat(selected).as("PDB " + e.getKey() + " selects exactly one workload").hasSize(1);
      assertThat(selected.get(0).replicas()).as("PDB " + e.getKey() + " workload replicas").isGreaterThanOrEqualTo(2);
      // An unready replica serves nothing; a node drain may always evict it.
      assertThat(e.getValue().getSpec().getUnhealthyPodEvictionPolicy()).as("PDB " + e.getKey() + " unhealthyPodEvictionPolicy")
          .isEqualTo("AlwaysAllow");
    }
    // Every replicated extproc Deployment is protected by a PDB.
    for (Workload w : workloads) {
      if (w.extProc().isPresent() && w.replicas() >= 2) {
        assertThat(pdbs.values()).as(w + " has a PDB")
            .anySatisfy(p -> assertThat(matches(p.getSpec().getSelector(), w.podLabels())).isTrue());
      }
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("overlays")
  void networkPoliciesOpenOnlyDeclaredContainerPorts(KubernetesManifests.Rendering overlay) {
    List<KubernetesManifests.Typed> objects = render(overlay);
    List<Workload> workloads = workloads(objects);
    var policies = KubernetesManifests.byName(objects, NetworkPolicy.class);
    assertThat(policies).isNotEmpty();
    policies.forEach((name, np) -> {
      List<Workload> selected = workloads.stream()
          .filter(w -> matches(np.getSpec().getPodSelector(), w.podLabels())).toList();
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
          List<Workload> peers = workloads.stream().filter(w -> matches(peer.getPodSelector(), w.podLabels())).toList();
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
    List<KubernetesManifests.Typed> objects = render(overlay);
    List<Workload> withExtProc = workloads(objects).stream().filter(w -> w.extProc().isPresent()).toList();
    assertThat(withExtProc).hasSize(1);
    Workload w = withExtProc.get(0);
    Container c = w.extProc().get();
    JsonNode config = mountedConfig(w, c, KubernetesManifests.byName(objects, ConfigMap.class));

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
    if (central) {
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
    List<KubernetesManifests.Typed> objects = render(overlay);
    Workload w = workloads(objects).stream().filter(x -> x.extProc().isPresent()).findFirst().orElseThrow();
    Container c = w.extProc().get();
    NetworkPolicy np = KubernetesManifests.byName(objects, NetworkPolicy.class).values().stream()
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

    JsonNode config = mountedConfig(w, c, KubernetesManifests.byName(objects, ConfigMap.class));
    boolean uriFromSecret = c.getEnv().stream().anyMatch(e -> e.getName().equals("DISAGG_USAGE_STORE_REDIS_URI")
        && e.getValueFrom() != null && e.getValueFrom().getSecretKeyRef() != null);
    if (uriFromSecret) {
      assertThat(egress).as("Redis").contains(6379);
      return;
    }
    URI uri = URI.create(config.path("store").path("redis_uri").asText());
    assertThat(uri.getScheme()).isIn("redis", "rediss");
    Service redis = KubernetesManifests.byName(objects, Service.class).get(uri.getHost());
    assertThat(redis).as("store.redis_uri host " + uri.getHost() + " is a rendered Service").isNotNull();
    assertThat(redis.getSpec().getPorts()).extracting(ServicePort::getPort).contains(uri.getPort());
    assertThat(egress).contains(uri.getPort());
    // Redis accepts only the extproc pods.
    NetworkPolicy redisPolicy = KubernetesManifests.byName(objects, NetworkPolicy.class).values().stream()
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
    List<KubernetesManifests.Typed> objects = render(overlay);
    Workload w = workloads(objects).stream().filter(x -> x.extProc().isPresent()).findFirst().orElseThrow();
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
    Path overlay = ProjectFiles.resolve(KubernetesManifests.OVERLAYS + "/sidecar");
    List<KubernetesManifests.Typed> objects = render(overlay);
    Workload w = workloads(objects).stream().filter(x -> x.extProc().isPresent()).findFirst().orElseThrow();
    var configMaps = KubernetesManifests.byName(objects, ConfigMap.class);
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

  // ---------------------------------------------------------------- the config files, without rendering

  /** Every config.yaml a kustomization turns into the service's ConfigMap. */
  static Stream<Path> serviceConfigFiles() {
    List<Path> out = new ArrayList<>();
    for (Path file : ProjectFiles.yamlFiles(KubernetesManifests.DIR)) {
      if (!file.getFileName().toString().equals("kustomization.yaml")) {
        continue;
      }
      for (JsonNode generator : YamlDocuments.single(file).path("configMapGenerator")) {
        if (generator.path("name").asText().equals("disagg-usage-extproc-config")) {
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
        "deploy/kubernetes/overlays/pod-local/config.yaml");
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("serviceConfigFiles")
  void serviceConfigUsesOnlyKnownKeysAndTheShippedPorts(Path file) {
    JsonNode config = YamlDocuments.single(file);
    assertThat(unknownConfigKeys(config)).as(ProjectFiles.relative(file)).isEmpty();
    assertThat(config.path("store").path("type").asText("memory")).isIn("memory", "redis");
    int grpc = config.path("grpc").path("port").asInt(DEFAULT_GRPC_PORT);
    int admin = config.path("admin").path("port").asInt(DEFAULT_ADMIN_PORT);
    List<Container> extProcs = workloads(KubernetesManifests.typedAll(KubernetesManifests.rawObjects())).stream()
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

  // ---------------------------------------------------------------- helpers

  static JsonNode parse(String yaml) {
    try {
      return YamlDocuments.YAML.readTree(yaml);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Dotted keys of the config that the service does not know. */
  static List<String> unknownConfigKeys(JsonNode config) {
    assertThat(config.isObject()).as("config.yaml is a mapping").isTrue();
    List<String> keys = new ArrayList<>();
    flatten(config, "", keys);
    return keys.stream().filter(k -> !CONFIG_KEYS.contains(k)).toList();
  }

  private static void flatten(JsonNode node, String prefix, List<String> out) {
    node.fields().forEachRemaining(e -> {
      String key = prefix.isEmpty() ? e.getKey() : prefix + "." + e.getKey();
      if (e.getValue().isObject()) {
        flatten(e.getValue(), key, out);
      } else {
        out.add(key);
      }
    });
  }

  /** The port the service binds: flag, then --set, then environment, then file, then default. */
  static int effectivePort(Container c, JsonNode config, String key, String flag, int dflt) {
    List<String> args = c.getArgs() == null ? List.of() : c.getArgs();
    Integer fromFlag = null;
    Integer fromSet = null;
    for (int i = 0; i < args.size(); i++) {
      String a = args.get(i);
      String next = i + 1 < args.size() ? args.get(i + 1) : null;
      if (a.equals(flag) && next != null) {
        fromFlag = Integer.valueOf(next);
      } else if (a.startsWith(flag + "=")) {
        fromFlag = Integer.valueOf(a.substring(flag.length() + 1));
      } else if ((a.equals("--set") || a.equals("-s")) && next != null && next.startsWith(key + "=")) {
        fromSet = Integer.valueOf(next.substring(key.length() + 1));
      } else if (a.startsWith("--set=" + key + "=")) {
        fromSet = Integer.valueOf(a.substring(("--set=" + key + "=").length()));
      }
    }
    if (fromFlag != null) {
      return fromFlag;
    }
    if (fromSet != null) {
      return fromSet;
    }
    String fromEnv = env(c, "DISAGG_USAGE_" + key.toUpperCase().replace('.', '_'));
    if (fromEnv != null) {
      return Integer.parseInt(fromEnv);
    }
    String[] parts = key.split("\\.");
    JsonNode value = config.path(parts[0]).path(parts[1]);
    return value.isMissingNode() || value.isNull() ? dflt : value.asInt();
  }

  /** The service's config file, read from the ConfigMap mounted where {@code --config} points. */
  static JsonNode mountedConfig(Workload w, Container c, Map<String, ConfigMap> configMaps) {
    List<String> args = c.getArgs() == null ? List.of() : c.getArgs();
    int i = args.indexOf("--config");
    String path = i >= 0 && i + 1 < args.size() ? args.get(i + 1) : env(c, "DISAGG_USAGE_CONFIG");
    assertThat(path).as(w + " passes --config").isNotNull();
    return parse(mountedFile(w, c, path, configMaps));
  }

  /** The content of a file that a container sees at {@code path} through a ConfigMap volume. */
  static String mountedFile(Workload w, Container c, String path, Map<String, ConfigMap> configMaps) {
    Path file = Path.of(path);
    VolumeMount mount = c.getVolumeMounts().stream()
        .filter(m -> Path.of(m.getMountPath()).equals(file.getParent()) && m.getSubPath() == null)
        .findFirst().orElseThrow(() -> new AssertionError(w + " container " + c.getName() + ": nothing mounted at "
            + file.getParent()));
    Volume volume = volume(w, mount.getName());
    assertThat(volume.getConfigMap()).as(w + " volume " + volume.getName() + " is a ConfigMap").isNotNull();
    ConfigMap cm = configMaps.get(volume.getConfigMap().getName());
    assertThat(cm).as(w + " ConfigMap " + volume.getConfigMap().getName()).isNotNull();
    String key = file.getFileName().toString();
    assertThat(cm.getData()).as(w + " ConfigMap " + cm.getMetadata().getName()).containsKey(key);
    return cm.getData().get(key);
  }

  static Volume volume(Workload w, String name) {
    return w.pod().getVolumes().stream().filter(v -> v.getName().equals(name)).findFirst()
        .orElseThrow(() -> new AssertionError(w + ": no volume " + name));
  }

  static Map<String, String> templateAnnotations(Workload w) {
    return KubernetesManifests.podTemplate(w.object()).orElseThrow().getMetadata().getAnnotations();
  }

  static String env(Container c, String name) {
    if (c.getEnv() == null) {
      return null;
    }
    return c.getEnv().stream().filter(e -> e.getName().equals(name)).map(EnvVar::getValue).filter(Objects::nonNull)
        .findFirst().orElse(null);
  }

  static int namedPort(Container c, String name) {
    return c.getPorts().stream().filter(p -> name.equals(p.getName())).map(ContainerPort::getContainerPort)
        .findFirst().orElseThrow(() -> new AssertionError("container " + c.getName() + " has no port named " + name));
  }

  static List<Probe> probes(Container c) {
    return Stream.of(c.getStartupProbe(), c.getReadinessProbe(), c.getLivenessProbe()).filter(Objects::nonNull).toList();
  }

  static Optional<Integer> probePort(Probe p, Map<String, Integer> ports) {
    if (p.getGrpc() != null) {
      return resolve(new IntOrString(p.getGrpc().getPort()), ports);
    }
    if (p.getHttpGet() != null) {
      return resolve(p.getHttpGet().getPort(), ports);
    }
    if (p.getTcpSocket() != null) {
      return resolve(p.getTcpSocket().getPort(), ports);
    }
    return Optional.empty();
  }

  /** A port given by number or name, if it is one of {@code ports}. */
  static Optional<Integer> resolve(IntOrString port, Map<String, Integer> ports) {
    if (port == null) {
      return Optional.empty();
    }
    String key = port.getIntVal() != null ? String.valueOf(port.getIntVal()) : port.getStrVal();
    return Optional.ofNullable(ports.get(key));
  }

  static boolean matches(LabelSelector selector, Map<String, String> labels) {
    if (selector == null) {
      return false;
    }
    if (!matches(selector.getMatchLabels(), labels)) {
      return false;
    }
    for (LabelSelectorRequirement r : selector.getMatchExpressions()) {
      String value = labels.get(r.getKey());
      boolean ok = switch (r.getOperator()) {
        case "In" -> value != null && r.getValues().contains(value);
        case "NotIn" -> value == null || !r.getValues().contains(value);
        case "Exists" -> value != null;
        case "DoesNotExist" -> value == null;
        default -> throw new AssertionError("unknown selector operator " + r.getOperator());
      };
      if (!ok) {
        return false;
      }
    }
    return true;
  }

  static boolean matches(Map<String, String> matchLabels, Map<String, String> labels) {
    return matchLabels == null || labels.entrySet().containsAll(matchLabels.entrySet());
  }
}
