package io.disaggusage.deploy;

import com.fasterxml.jackson.databind.JsonNode;
import com.marcnuri.helm.Helm;
import com.marcnuri.helm.LintResult;
import com.marcnuri.helm.TemplateCommand;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The chart under deploy/helm, rendered and linted by a real Helm (helm-java: Helm's own Go library
 * behind a Java API, from Maven Central) — what {@code helm template} and {@code helm lint} print.
 */
final class HelmChart {
  static final Path CHART = ProjectFiles.resolve("deploy/helm/disagg-usage-extproc");
  static final String RELEASE = "disagg-usage-extproc";
  static final String NAMESPACE = "llm";
  /** The cluster version templates render for (the chart needs 1.29+ for native sidecars). */
  static final String KUBE_VERSION = "1.32.0";

  /** The value sets the suite renders, by name: each one a way operators install the chart. */
  static final Map<String, Map<String, Object>> VARIANTS = Map.of(
      "defaults", Map.of(),
      "external-redis", Map.of("redis.bundled", false, "redis.external.uriSecret.name", "disagg-usage-redis"),
      "monitored", Map.of("serviceMonitor.enabled", true, "podMonitor.enabled", true, "replicaCount", 3,
          "extraEnv[0].name", "DISAGG_USAGE_LOGGING_FORMAT", "extraEnv[0].value", "json",
          "config.metrics.otlp.endpoint", "http://otel-collector.monitoring:4318"),
      "sidecar-snippet", Map.of("sidecarSnippet.enabled", true));

  /** Prometheus Operator kinds the chart renders behind a flag; checked apart from the typed objects. */
  static final List<String> MONITOR_KINDS =
      List.of("monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PodMonitor");

  private static final Map<String, List<JsonNode>> RENDERED = new ConcurrentHashMap<>();

  private HelmChart() {}

  /** {@code helm template disagg deploy/helm/disagg-usage-extproc -n llm --set ...} for a variant. */
  static List<JsonNode> rendered(String variant) {
    return RENDERED.computeIfAbsent(variant, v -> KubernetesManifests.parseStream(template(VARIANTS.get(v)), "helm/" + v));
  }

  static String template(Map<String, Object> values) {
    TemplateCommand template = new Helm(CHART).template().withName(RELEASE).withNamespace(NAMESPACE)
        .withKubeVersion(KUBE_VERSION);
    values.forEach(template::set);
    return template.call();
  }

  /** The chart's objects for a variant, without the Prometheus Operator kinds, as sources. */
  static List<KubernetesManifests.Source> sources(String variant) {
    return rendered(variant).stream()
        .map(n -> new KubernetesManifests.Source("helm/" + variant, n))
        .filter(s -> !MONITOR_KINDS.contains(s.typeKey()))
        .toList();
  }

  static LintResult lint() {
    return new Helm(CHART).lint().strict().call();
  }
}
