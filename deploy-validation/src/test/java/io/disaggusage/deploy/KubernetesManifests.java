package io.disaggusage.deploy;

import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.PodTemplateSpec;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.ServiceAccount;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.apps.StatefulSet;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicy;
import io.fabric8.kubernetes.api.model.policy.v1.PodDisruptionBudget;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;

/**
 * The Kubernetes manifests under deploy/kubernetes: raw object files, overlays rendered by
 * {@code kustomize build} (the pinned release of scripts/install-test-tools), strict typing into fabric8 models (allow-listed kinds, no unknown fields).
 */
final class KubernetesManifests {
  static final String DIR = "deploy/kubernetes";
  static final String OVERLAYS = DIR + "/overlays";
  static final String EXTPROC_IMAGE = "ghcr.io/disagg-usage/disagg-usage-extproc:0.1.0";
  static final String EXTPROC_CONTAINER = "extproc";

  /** The kinds the manifests may contain, by "apiVersion/kind". Anything else fails. */
  static final Map<String, Class<? extends HasMetadata>> KINDS = Map.of(
      "v1/ServiceAccount", ServiceAccount.class,
      "v1/ConfigMap", ConfigMap.class,
      "v1/Service", Service.class,
      "apps/v1/Deployment", Deployment.class,
      "apps/v1/StatefulSet", StatefulSet.class,
      "policy/v1/PodDisruptionBudget", PodDisruptionBudget.class,
      "networking.k8s.io/v1/NetworkPolicy", NetworkPolicy.class);

  /** Kustomize's own files: they have apiVersion and kind but are not Kubernetes objects. */
  static final Set<String> KUSTOMIZE_KINDS = Set.of(
      "kustomize.config.k8s.io/v1beta1/Kustomization", "kustomize.config.k8s.io/v1alpha1/Component");

  /** One YAML document with where it came from (a file, or an overlay's rendering). */
  record Source(String origin, JsonNode node) {
    String typeKey() {
      return node.path("apiVersion").asText() + "/" + node.path("kind").asText();
    }

    String describe() {
      return origin + " " + typeKey() + " " + node.path("metadata").path("name").asText();
    }
  }

  /** A typed object with where it came from. */
  record Typed(String origin, HasMetadata object) {
    String describe() {
      return origin + " " + object.getKind() + " " + object.getMetadata().getName();
    }
  }

  private static final Map<Path, List<JsonNode>> RENDERED = new ConcurrentHashMap<>();

  private KubernetesManifests() {}

  /** The overlay directories, sorted. */
  static List<Path> overlays() {
    Path dir = ProjectFiles.resolve(OVERLAYS);
    try (Stream<Path> list = Files.list(dir)) {
      return list.filter(Files::isDirectory).sorted(Comparator.comparing(Path::toString)).toList();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * One way the project's manifests are installed, rendered: a kustomize overlay, or the Helm chart with
   * one of its value sets. {@code central}: the service runs as a replicated Deployment of its own.
   */
  record Rendering(String name, boolean central, java.util.function.Supplier<List<Source>> render) {
    List<Source> sources() {
      return render.get();
    }

    @Override
    public String toString() {
      return name;
    }
  }

  /** Every overlay (kustomize build) and every Helm variant that deploys workloads. */
  static List<Rendering> renderings() {
    List<Rendering> out = new ArrayList<>();
    for (Path overlay : overlays()) {
      out.add(new Rendering("overlays/" + overlayName(overlay), central(overlay), () -> renderedSources(overlay)));
    }
    for (String variant : new java.util.TreeSet<>(HelmChart.VARIANTS.keySet())) {
      if (!variant.equals("sidecar-snippet")) {
        out.add(new Rendering("helm/" + variant, true, () -> HelmChart.sources(variant)));
      }
    }
    return out;
  }

  static String overlayName(Path overlay) {
    return overlay.getFileName().toString();
  }

  /**
   * Whether the overlay runs the service centrally (it includes components/central: shared replicas,
   * a Service, the shared store) rather than as a sidecar of the orchestrator pod.
   */
  static boolean central(Path overlay) {
    for (JsonNode component : YamlDocuments.single(overlay.resolve("kustomization.yaml")).path("components")) {
      if (component.asText().equals("../../components/central")) {
        return true;
      }
    }
    return false;
  }

  /** Whether the overlay runs the edge guard (it includes components/edge-guard). */
  static boolean edgeGuard(Path overlay) {
    for (JsonNode component : YamlDocuments.single(overlay.resolve("kustomization.yaml")).path("components")) {
      if (component.asText().equals("../../components/edge-guard")) {
        return true;
      }
    }
    return false;
  }

  /** Every document under deploy/kubernetes that has apiVersion and kind (kustomize files included). */
  static List<Source> rawDocuments() {
    List<Source> out = new ArrayList<>();
    for (Path file : ProjectFiles.yamlFiles(DIR)) {
      for (JsonNode doc : YamlDocuments.read(file)) {
        if (doc.hasNonNull("apiVersion") && doc.hasNonNull("kind")) {
          out.add(new Source(ProjectFiles.relative(file), doc));
        }
      }
    }
    return out;
  }

  /** The raw documents that are Kubernetes objects (not kustomize's own files). */
  static List<Source> rawObjects() {
    return rawDocuments().stream().filter(s -> !KUSTOMIZE_KINDS.contains(s.typeKey())).toList();
  }

  /** The kustomize release the suite renders with; scripts/install-test-tools builds it into .tools/go/bin. */
  static final String KUSTOMIZE_VERSION = "v5.7.1";

  /**
   * The documents {@code kustomize build <overlay>} prints, rendered once per overlay per test run. A
   * failing render throws.
   */
  static List<JsonNode> rendered(Path overlay) {
    return RENDERED.computeIfAbsent(overlay.toAbsolutePath().normalize(), KubernetesManifests::render);
  }

  private static List<JsonNode> render(Path overlay) {
    String relative = ProjectFiles.relative(overlay);
    GoTools.Run run = GoTools.run(GoTools.KUSTOMIZE, List.of("build", relative));
    if (run.exitCode() != 0) {
      throw new IllegalStateException("kustomize build " + relative + " failed (exit " + run.exitCode() + "): "
          + run.stderr());
    }
    return parseStream(run.stdout(), "kustomize build " + relative);
  }

  /** A multi-document YAML stream, read strictly (duplicate keys fail). */
  static List<JsonNode> parseStream(String yaml, String origin) {
    try (var parser = YamlDocuments.YAML.getFactory().createParser(yaml)) {
      List<JsonNode> docs = new ArrayList<>();
      var it = YamlDocuments.YAML.readValues(parser, JsonNode.class);
      while (it.hasNext()) {
        JsonNode doc = it.next();
        if (doc != null && doc.isObject() && !doc.isEmpty()) {
          docs.add(doc);
        }
      }
      return docs;
    } catch (IOException e) {
      throw new UncheckedIOException(origin + ": " + e.getMessage(), e);
    }
  }

  /** The rendered overlay as sources. */
  static List<Source> renderedSources(Path overlay) {
    String origin = "overlays/" + overlayName(overlay);
    return rendered(overlay).stream().map(n -> new Source(origin, n)).toList();
  }

  /** Parses a document into its fabric8 type; unknown kinds and API versions are errors. */
  static HasMetadata typed(Source source) {
    Class<? extends HasMetadata> type = KINDS.get(source.typeKey());
    if (type == null) {
      throw new IllegalArgumentException(source.origin() + ": kind " + source.typeKey()
          + " is not in the allow-list " + KINDS.keySet());
    }
    try {
      return YamlDocuments.JSON.treeToValue(source.node(), type);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException(source.describe() + ": " + e.getOriginalMessage(), e);
    }
  }

  static List<Typed> typedAll(List<Source> sources) {
    return sources.stream().map(s -> new Typed(s.origin(), typed(s))).toList();
  }

  /**
   * Every field the model did not recognise, as paths: fabric8 keeps unknown keys in
   * {@code getAdditionalProperties()} instead of failing, so this walks every property getter.
   */
  static List<String> unknownFields(Object model) {
    List<String> out = new ArrayList<>();
    walk(model, "", out);
    return out;
  }

  private static void walk(Object value, String path, List<String> out) {
    if (value == null) {
      return;
    }
    if (value instanceof Collection<?> items) {
      int i = 0;
      for (Object item : items) {
        walk(item, path + "[" + i++ + "]", out);
      }
      return;
    }
    if (value instanceof Map<?, ?> map) {
      for (Map.Entry<?, ?> e : map.entrySet()) {
        walk(e.getValue(), path + "[" + e.getKey() + "]", out);
      }
      return;
    }
    Class<?> type = value.getClass();
    if (!type.getName().startsWith("io.fabric8.") || type.isEnum()) {
      return;
    }
    for (Method m : type.getMethods()) {
      if (m.getParameterCount() != 0 || Modifier.isStatic(m.getModifiers())) {
        continue;
      }
      if (m.getName().equals("getAdditionalProperties")) {
        Map<?, ?> extra = (Map<?, ?>) invoke(m, value);
        if (extra != null && !extra.isEmpty()) {
          for (Object key : extra.keySet()) {
            out.add((path.isEmpty() ? "" : path + ".") + key);
          }
        }
        continue;
      }
      JsonProperty property = m.getAnnotation(JsonProperty.class);
      if (property == null) {
        continue;
      }
      String name = property.value().isEmpty() ? m.getName() : property.value();
      walk(invoke(m, value), path.isEmpty() ? name : path + "." + name, out);
    }
  }

  private static Object invoke(Method m, Object target) {
    try {
      return m.invoke(target);
    } catch (IllegalAccessException | InvocationTargetException e) {
      throw new IllegalStateException(m + ": " + e, e);
    }
  }

  /** The pod template of a workload, if the object is one. */
  static Optional<PodTemplateSpec> podTemplate(HasMetadata object) {
    if (object instanceof Deployment d) {
      return Optional.ofNullable(d.getSpec()).map(s -> s.getTemplate());
    }
    if (object instanceof StatefulSet s) {
      return Optional.ofNullable(s.getSpec()).map(x -> x.getTemplate());
    }
    return Optional.empty();
  }

  /** Objects of one type, keyed by name, in document order. */
  static <T extends HasMetadata> Map<String, T> byName(List<Typed> objects, Class<T> type) {
    Map<String, T> out = new LinkedHashMap<>();
    for (Typed t : objects) {
      if (type.isInstance(t.object())) {
        out.put(t.object().getMetadata().getName(), type.cast(t.object()));
      }
    }
    return out;
  }
}
