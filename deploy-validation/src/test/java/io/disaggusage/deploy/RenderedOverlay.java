package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.LabelSelector;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * The objects of one rendered kustomize overlay or Helm variant, with its workloads and ConfigMaps: what
 * the policies that hold an overlay's objects to each other look up (which workloads a selector picks,
 * which one runs the service, what a ConfigMap volume holds).
 */
record RenderedOverlay(
    List<KubernetesManifests.Typed> objects, List<Workload> workloads, Map<String, ConfigMap> configMaps) {

  static RenderedOverlay of(KubernetesManifests.Rendering overlay) {
    return of(KubernetesManifests.typedAll(overlay.sources()));
  }

  /** The kustomize overlay in {@code dir}, rendered. */
  static RenderedOverlay of(Path dir) {
    return of(KubernetesManifests.typedAll(KubernetesManifests.renderedSources(dir)));
  }

  static RenderedOverlay of(List<KubernetesManifests.Typed> objects) {
    return new RenderedOverlay(objects, Workload.in(objects), KubernetesManifests.byName(objects, ConfigMap.class));
  }

  /** The objects of one kind, by name. */
  <T extends HasMetadata> Map<String, T> byName(Class<T> kind) {
    return KubernetesManifests.byName(objects, kind);
  }

  /** The objects of one kind, by name, asserting the overlay has some. */
  <T extends HasMetadata> Map<String, T> present(Class<T> kind) {
    Map<String, T> found = byName(kind);
    assertThat(found).as(kind.getSimpleName() + " objects").isNotEmpty();
    return found;
  }

  /** The workloads whose pods {@code selector} selects. */
  List<Workload> selectedBy(LabelSelector selector) {
    return workloads.stream().filter(w -> KubernetesPolicies.matches(selector, w.podLabels())).toList();
  }

  /** The workloads whose pods carry every label of {@code matchLabels} (a Service's selector). */
  List<Workload> selectedBy(Map<String, String> matchLabels) {
    return workloads.stream().filter(w -> KubernetesPolicies.matches(matchLabels, w.podLabels())).toList();
  }

  Workload workload(String name) {
    return workloads.stream().filter(w -> w.name().equals(name)).findFirst()
        .orElseThrow(() -> new AssertionError("no workload " + name));
  }

  /** The (first) workload that runs the service. */
  Workload extProcWorkload() {
    return workloads.stream().filter(w -> w.extProc().isPresent()).findFirst()
        .orElseThrow(() -> new AssertionError("no workload runs the service"));
  }
}
