package io.disaggusage.deploy;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.PodSpec;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.apps.StatefulSet;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Stream;

/**
 * A workload (Deployment/StatefulSet) with where it came from: a pod template the Kubernetes policies
 * check.
 */
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

  /** The workloads among {@code objects}, in their order. */
  static List<Workload> in(List<KubernetesManifests.Typed> objects) {
    List<Workload> out = new ArrayList<>();
    for (KubernetesManifests.Typed t : objects) {
      KubernetesManifests.podTemplate(t.object()).ifPresent(p ->
          out.add(new Workload(t.origin(), t.object(), p.getSpec(), p.getMetadata().getLabels())));
    }
    return out;
  }

  static boolean isExtProc(Container c) {
    return c.getName().equals(KubernetesManifests.EXTPROC_CONTAINER);
  }
}
