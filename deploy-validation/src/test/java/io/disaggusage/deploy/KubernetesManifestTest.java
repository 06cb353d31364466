package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every Kubernetes object under deploy/kubernetes, raw and as rendered by each overlay, parses into its
 * fabric8 model with no unknown field, and is of an allow-listed kind.
 */
class KubernetesManifestTest {
  static final Path CENTRAL_DEPLOYMENT = ProjectFiles.resolve("deploy/kubernetes/components/central/deployment.yaml");

  static Stream<Path> overlays() {
    return KubernetesManifests.overlays().stream();
  }

  @Test
  void rawObjectFilesAreAllowListedKindsWithNoUnknownFields() {
    List<KubernetesManifests.Source> raw = KubernetesManifests.rawObjects();
    // base ServiceAccount; central Deployment, 2 Services, PDB, NetworkPolicy; Redis Deployment, Service,
    // NetworkPolicy; sidecar Deployment, 2 Services, NetworkPolicy.
    assertThat(raw).hasSizeGreaterThanOrEqualTo(13);
    for (KubernetesManifests.Source s : raw) {
      HasMetadata object = KubernetesManifests.typed(s);
      assertThat(KubernetesManifests.unknownFields(object)).as(s.describe()).isEmpty();
    }
  }

  @Test
  void theOnlyNonObjectDocumentsWithAKindAreKustomizeFilesNamedKustomizationYaml() {
    List<KubernetesManifests.Source> kustomize = KubernetesManifests.rawDocuments().stream()
        .filter(s -> KubernetesManifests.KUSTOMIZE_KINDS.contains(s.typeKey()))
        .toList();
    assertThat(kustomize).isNotEmpty();
    assertThat(kustomize).allSatisfy(s -> assertThat(s.origin()).endsWith("/kustomization.yaml"));
    // Every kustomization directory is recognised: base, three components, every overlay.
    assertThat(kustomize).hasSize(4 + KubernetesManifests.overlays().size());
  }

  @Test
  void rawObjectsAreCompleteObjectsNotPatches() {
    for (KubernetesManifests.Source s : KubernetesManifests.rawObjects()) {
      HasMetadata object = KubernetesManifests.typed(s);
      assertThat(object.getMetadata().getName()).as(s.describe()).isNotBlank();
      KubernetesManifests.podTemplate(object).ifPresent(t -> {
        assertThat(t.getSpec().getContainers()).as(s.describe()).isNotEmpty();
        assertThat(t.getMetadata().getLabels()).as(s.describe()).isNotEmpty();
      });
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("overlays")
  void renderedObjectsAreAllowListedKindsWithNoUnknownFields(Path overlay) {
    List<KubernetesManifests.Source> rendered = KubernetesManifests.renderedSources(overlay);
    assertThat(rendered).isNotEmpty();
    for (KubernetesManifests.Source s : rendered) {
      assertThat(KubernetesManifests.unknownFields(KubernetesManifests.typed(s))).as(s.describe()).isEmpty();
    }
  }

  @Test
  void walkerReportsTyposAtAnyDepth() {
    ObjectNode node = (ObjectNode) YamlDocuments.single(CENTRAL_DEPLOYMENT).deepCopy();
    KubernetesManifests.Source clean = new KubernetesManifests.Source("test", node.deepCopy());
    assertThat(KubernetesManifests.unknownFields(KubernetesManifests.typed(clean))).isEmpty();

    ObjectNode container = (ObjectNode) node.path("spec").path("template").path("spec").path("containers").get(0);
    container.set("readinesProbe", container.get("readinessProbe"));
    ((ObjectNode) container.path("securityContext")).put("runAsNonroot", true);
    ((ObjectNode) node.path("spec")).put("replica", 3);
    ((ObjectNode) node.path("metadata")).put("labelz", "x");

    HasMetadata typo = KubernetesManifests.typed(new KubernetesManifests.Source("test", node));
    assertThat(typo).isInstanceOf(Deployment.class);
    assertThat(KubernetesManifests.unknownFields(typo)).containsExactlyInAnyOrder(
        "metadata.labelz",
        "spec.replica",
        "spec.template.spec.containers[0].readinesProbe",
        "spec.template.spec.containers[0].securityContext.runAsNonroot");
  }

  @Test
  void walkerReportsTyposInsideListsOfListsAndInNetworkPolicies() {
    ObjectNode node = (ObjectNode) YamlDocuments.read(
        ProjectFiles.resolve("deploy/kubernetes/components/central/networkpolicy.yaml")).get(0).deepCopy();
    ArrayNode ports = (ArrayNode) node.path("spec").path("ingress").get(1).path("ports");
    ((ObjectNode) ports.get(0)).put("protocl", "TCP");
    HasMetadata typo = KubernetesManifests.typed(new KubernetesManifests.Source("test", node));
    assertThat(KubernetesManifests.unknownFields(typo)).containsExactly("spec.ingress[1].ports[0].protocl");
  }

  @Test
  void unknownKindsAndApiVersionsAreRejected() {
    ObjectNode node = (ObjectNode) YamlDocuments.single(CENTRAL_DEPLOYMENT).deepCopy();
    node.put("kind", "Deploymnet");
    assertThatThrownBy(() -> KubernetesManifests.typed(new KubernetesManifests.Source("test", node)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("apps/v1/Deploymnet");

    ObjectNode old = (ObjectNode) YamlDocuments.single(CENTRAL_DEPLOYMENT).deepCopy();
    old.put("apiVersion", "extensions/v1beta1");
    assertThatThrownBy(() -> KubernetesManifests.typed(new KubernetesManifests.Source("test", old)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not in the allow-list");

    ObjectNode ingress = (ObjectNode) YamlDocuments.single(CENTRAL_DEPLOYMENT).deepCopy();
    ingress.put("apiVersion", "networking.k8s.io/v1").put("kind", "Ingress");
    assertThatThrownBy(() -> KubernetesManifests.typed(new KubernetesManifests.Source("test", ingress)))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void wronglyTypedValuesAreRejected() {
    ObjectNode node = (ObjectNode) YamlDocuments.single(CENTRAL_DEPLOYMENT).deepCopy();
    ((ObjectNode) node.path("spec")).put("replicas", "two");
    assertThatThrownBy(() -> KubernetesManifests.typed(new KubernetesManifests.Source("test", node)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("two");
  }

  @Test
  void everyShippedKindIsInTheAllowListAndNothingElseIsShipped() {
    Set<String> shipped = KubernetesManifests.rawObjects().stream()
        .map(KubernetesManifests.Source::typeKey).collect(Collectors.toSet());
    assertThat(KubernetesManifests.KINDS.keySet()).containsAll(shipped);
    assertThat(shipped).contains("apps/v1/Deployment", "v1/Service", "policy/v1/PodDisruptionBudget",
        "networking.k8s.io/v1/NetworkPolicy", "v1/ServiceAccount");
  }
}
