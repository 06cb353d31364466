package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.PodSpec;
import io.fabric8.kubernetes.api.model.Volume;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** Every overlay under deploy/kubernetes/overlays renders with plain {@code kustomize build} (no load-restrictor flag): what {@code kubectl apply -k} runs. */
class KubernetesRenderTest {
  /** What each overlay renders to: kind → count. A new overlay needs an entry here. */
  static final Map<String, Map<String, Integer>> EXPECTED_KINDS = Map.of(
      "sidecar", Map.of(
          "ServiceAccount", 1, "ConfigMap", 2, "Service", 2, "Deployment", 1, "NetworkPolicy", 1),
      "central", Map.of(
          "ServiceAccount", 1, "ConfigMap", 2, "Service", 3, "Deployment", 2, "PodDisruptionBudget", 1,
          "NetworkPolicy", 2),
      "central-external-redis", Map.of(
          "ServiceAccount", 1, "ConfigMap", 1, "Service", 2, "Deployment", 1, "PodDisruptionBudget", 1,
          "NetworkPolicy", 1),
      // central + Redis, the worker Envoys' ConfigMap, SGLang prefill/decode StatefulSets with headless
      // Services, the llm-d decode Deployment, one NetworkPolicy per worker kind
      "pod-local", Map.of(
          "ServiceAccount", 1, "ConfigMap", 3, "Service", 5, "Deployment", 3, "StatefulSet", 2,
          "PodDisruptionBudget", 1, "NetworkPolicy", 5),
      // components/edge-guard alone: the guard's own ServiceAccount, config, Deployment, Service, PDB and
      // NetworkPolicy; no Redis
      "edge-guard", Map.of(
          "ServiceAccount", 1, "ConfigMap", 1, "Service", 1, "Deployment", 1, "PodDisruptionBudget", 1,
          "NetworkPolicy", 1));

  static Stream<Path> overlays() {
    return KubernetesManifests.overlays().stream();
  }

  static List<KubernetesManifests.Typed> render(Path overlay) {
    return KubernetesManifests.typedAll(KubernetesManifests.renderedSources(overlay));
  }

  /** The README and docs name the release; the installer builds it and stamps it. */
  @Test
  void rendersWithThePinnedKustomize() throws java.io.IOException {
    assertThat(java.nio.file.Files.readString(ProjectFiles.resolve(EnvoyBinaries.INSTALLER)))
        .contains("kustomize_version=" + KubernetesManifests.KUSTOMIZE_VERSION + "\n");
    assertThat(GoTools.version(GoTools.KUSTOMIZE)).isEqualTo(KubernetesManifests.KUSTOMIZE_VERSION);
  }

  @Test
  void everyOverlayDirectoryHasAnExpectationAndEveryExpectationADirectory() {
    assertThat(overlays().map(KubernetesManifests::overlayName))
        .containsExactlyInAnyOrderElementsOf(EXPECTED_KINDS.keySet());
    overlays().forEach(o -> assertThat(o.resolve("kustomization.yaml")).isRegularFile());
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("overlays")
  void rendersToTheExpectedKinds(Path overlay) {
    List<KubernetesManifests.Typed> objects = render(overlay);
    Map<String, Integer> kinds = objects.stream()
        .collect(Collectors.groupingBy(t -> t.object().getKind(), TreeMap::new, Collectors.summingInt(t -> 1)));
    assertThat(kinds).as(KubernetesManifests.overlayName(overlay))
        .isEqualTo(new TreeMap<>(EXPECTED_KINDS.get(KubernetesManifests.overlayName(overlay))));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("overlays")
  void everyConfigMapVolumeNamesARenderedConfigMap(Path overlay) {
    List<KubernetesManifests.Typed> objects = render(overlay);
    var configMaps = KubernetesManifests.byName(objects, ConfigMap.class);
    long volumes = 0;
    for (KubernetesManifests.Typed t : objects) {
      var template = KubernetesManifests.podTemplate(t.object());
      if (template.isEmpty()) {
        continue;
      }
      for (Volume v : template.get().getSpec().getVolumes()) {
        if (v.getConfigMap() != null) {
          volumes++;
          // Generated ConfigMaps carry a content hash; kustomize must have rewritten the reference.
          assertThat(configMaps).as(t.describe() + " volume " + v.getName())
              .containsKey(v.getConfigMap().getName());
          assertThat(v.getConfigMap().getName()).matches(".*-[a-z0-9]{10}");
        }
      }
    }
    assertThat(volumes).isPositive();
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("overlays")
  void extProcUsesThePlaceholderImageAndEverythingCarriesThePartOfLabel(Path overlay) {
    List<KubernetesManifests.Typed> objects = render(overlay);
    List<Container> extProc = objects.stream()
        .flatMap(t -> KubernetesManifests.podTemplate(t.object()).stream())
        .map(p -> p.getSpec())
        .flatMap(KubernetesRenderTest::allContainers)
        .filter(c -> c.getName().equals(KubernetesManifests.EXTPROC_CONTAINER))
        .toList();
    assertThat(extProc).hasSize(1);
    assertThat(extProc.get(0).getImage()).isEqualTo(KubernetesManifests.EXTPROC_IMAGE);
    for (KubernetesManifests.Typed t : objects) {
      assertThat(t.object().getMetadata().getLabels()).as(t.describe())
          .containsEntry("app.kubernetes.io/part-of", "disagg-usage");
      KubernetesManifests.podTemplate(t.object()).ifPresent(p ->
          assertThat(p.getMetadata().getLabels()).as(t.describe() + " pod template")
              .containsEntry("app.kubernetes.io/part-of", "disagg-usage"));
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("overlays")
  void centralOverlaysPutEverythingInOneNamespaceAndTheSidecarOverlayLeavesItToTheUser(Path overlay) {
    List<KubernetesManifests.Typed> objects = render(overlay);
    if (KubernetesManifests.central(overlay) || KubernetesManifests.edgeGuard(overlay)) {
      assertThat(objects).allSatisfy(t ->
          assertThat(t.object().getMetadata().getNamespace()).as(t.describe()).isEqualTo(Manifests.NAMESPACE));
    } else {
      assertThat(objects).allSatisfy(t ->
          assertThat(t.object().getMetadata().getNamespace()).as(t.describe()).isNull());
    }
  }

  @Test
  void sidecarEnvoyConfigMapIsDeployEnvoyYamlByteForByte() throws Exception {
    Path overlay = ProjectFiles.resolve(KubernetesManifests.OVERLAYS + "/sidecar");
    List<KubernetesManifests.Typed> objects = render(overlay);
    List<ConfigMap> envoy = KubernetesManifests.byName(objects, ConfigMap.class).values().stream()
        .filter(c -> c.getData() != null && c.getData().containsKey("envoy.yaml"))
        .toList();
    assertThat(envoy).hasSize(1);
    assertThat(envoy.get(0).getData().get("envoy.yaml"))
        .isEqualTo(Files.readString(ProjectFiles.resolve("deploy/envoy/envoy.yaml")));
  }

  @Test
  void externalRedisOverlayTakesTheUriFromASecretAndShipsNoRedis() {
    Path overlay = ProjectFiles.resolve(KubernetesManifests.OVERLAYS + "/central-external-redis");
    List<KubernetesManifests.Typed> objects = render(overlay);
    assertThat(objects).noneSatisfy(t -> assertThat(t.object().getMetadata().getName()).contains("redis"));
    Container extProc = objects.stream()
        .flatMap(t -> KubernetesManifests.podTemplate(t.object()).stream())
        .flatMap(p -> allContainers(p.getSpec()))
        .filter(c -> c.getName().equals(KubernetesManifests.EXTPROC_CONTAINER))
        .findFirst().orElseThrow();
    assertThat(extProc.getEnv()).anySatisfy(e -> {
      assertThat(e.getName()).isEqualTo("DISAGG_USAGE_STORE_REDIS_URI");
      assertThat(e.getValueFrom().getSecretKeyRef().getName()).isEqualTo("disagg-usage-redis");
      assertThat(e.getValueFrom().getSecretKeyRef().getKey()).isEqualTo("uri");
    });
  }

  /**
   * The edge guard runs the shipped image as the edge role (its config turns it on; nothing in the
   * container's arguments or environment turns it off), stores nothing, and shares no name or selector
   * with the usage service, so its component can join any overlay.
   */
  @Test
  void edgeGuardOverlayRunsTheEdgeRoleWithoutAStoreAndSharesNoNameWithTheUsageService() {
    Path overlay = ProjectFiles.resolve(KubernetesManifests.OVERLAYS + "/edge-guard");
    RenderedOverlay rendered = RenderedOverlay.of(overlay);
    Workload w = rendered.extProcWorkload();
    Container c = w.extProc().orElseThrow();
    JsonNode config = KubernetesPolicies.mountedConfig(w, c, rendered.configMaps());
    assertThat(config.path("edge_guard").path("enabled").asBoolean()).as("edge_guard.enabled").isTrue();
    assertThat(config.has("store")).as("no store settings: the edge role ignores them").isFalse();
    assertThat(c.getArgs()).noneSatisfy(a -> assertThat(a).contains("edge_guard"));
    assertThat(c.getEnv()).noneSatisfy(e -> assertThat(e.getName()).startsWith("DISAGG_USAGE_EDGE_GUARD"));
    assertThat(rendered.objects()).noneSatisfy(t -> assertThat(t.object().getMetadata().getName()).contains("redis"));
    assertThat(w.podLabels()).containsEntry("app.kubernetes.io/component", "edge-guard");
    // Nothing the central overlays render has a name the guard's objects take.
    for (Path other : List.of(ProjectFiles.resolve(KubernetesManifests.OVERLAYS + "/central"),
        ProjectFiles.resolve(KubernetesManifests.OVERLAYS + "/central-external-redis"))) {
      var names = render(other).stream().map(t -> t.object().getKind() + "/" + t.object().getMetadata().getName()).toList();
      assertThat(rendered.objects()).noneSatisfy(t ->
          assertThat(names).contains(t.object().getKind() + "/" + t.object().getMetadata().getName()));
      RenderedOverlay usage = RenderedOverlay.of(other);
      usage.present(io.fabric8.kubernetes.api.model.Service.class).values().forEach(s ->
          assertThat(KubernetesPolicies.matches(s.getSpec().getSelector(), w.podLabels()))
              .as("usage Service " + s.getMetadata().getName() + " selects no guard pod").isFalse());
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("overlays")
  void everyOverlayLetsTheUserSetTheImageInOnePlace(Path overlay) {
    JsonNode kustomization = YamlDocuments.single(overlay.resolve("kustomization.yaml"));
    String repository = KubernetesManifests.EXTPROC_IMAGE.substring(0, KubernetesManifests.EXTPROC_IMAGE.lastIndexOf(':'));
    assertThat(kustomization.path("images")).as("images: of " + KubernetesManifests.overlayName(overlay))
        .anySatisfy(i -> assertThat(i.path("name").asText()).isEqualTo(repository));
  }

  static Stream<Container> allContainers(PodSpec spec) {
    return Stream.concat(spec.getInitContainers().stream(), spec.getContainers().stream());
  }
}
