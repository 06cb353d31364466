package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.marcnuri.helm.LintResult;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.Volume;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The Helm chart (deploy/helm/disagg-usage-extproc) with a real Helm: it lints cleanly, refuses the
 * settings that would silently lose corrections, and its sidecar snippet obeys the rule for a container
 * in a pod that carries LLM traffic. Its central renderings go through every rule of
 * {@link KubernetesPolicyTest} and {@link KubernetesOverlayPolicyTest} (see {@link KubernetesManifests#renderings()}).
 */
class HelmChartTest {
  @Test
  void lintsCleanlyInStrictMode() {
    LintResult lint = HelmChart.lint();
    assertThat(lint.isFailed()).as("helm lint --strict: %s", lint.getMessages()).isFalse();
  }

  @Test
  void everyVariantRendersAndTheCentralOnesAreAmongThePolicyChecked() {
    for (String variant : HelmChart.VARIANTS.keySet()) {
      assertThat(HelmChart.rendered(variant)).as(variant).isNotEmpty();
    }
    assertThat(KubernetesManifests.renderings()).extracting(KubernetesManifests.Rendering::name)
        .contains("helm/defaults", "helm/external-redis", "helm/monitored");
  }

  @Test
  void aMemoryStoreWithSeveralReplicasOrAnUnnamedExternalRedisIsRefused() {
    assertThatThrownBy(() -> HelmChart.template(Map.of("config.store.type", "memory")))
        .hasMessageContaining("config.store.type memory with replicaCount > 1");
    assertThatThrownBy(() -> HelmChart.template(Map.of("redis.bundled", false)))
        .hasMessageContaining("redis.external.uriSecret.name");
    assertThat(HelmChart.template(Map.of("config.store.type", "memory", "replicaCount", 1)))
        .as("one replica may use the memory store").contains("type: memory");
  }

  /** The shipped NetworkPolicy would block the OTLP push: with an endpoint set, the collector's port is open. */
  @Test
  void anOtlpEndpointOpensEgressToTheCollectorsPort() {
    assertThat(egressPorts("monitored")).contains(4318);
    assertThat(egressPorts("defaults")).doesNotContain(4318);
  }

  private static List<Integer> egressPorts(String variant) {
    List<Integer> ports = new java.util.ArrayList<>();
    HelmChart.rendered(variant).stream().filter(n -> n.path("kind").asText().equals("NetworkPolicy"))
        .filter(n -> n.at("/spec/podSelector/matchLabels").toString().contains("disagg-usage-extproc"))
        .forEach(n -> n.at("/spec/egress").forEach(rule -> rule.path("ports").forEach(p -> ports.add(p.path("port").asInt()))));
    return ports;
  }

  @Test
  void sidecarSnippetCannotMakeTheOrchestratorsPodUnready() throws Exception {
    List<JsonNode> rendered = HelmChart.rendered("sidecar-snippet");
    assertThat(rendered).extracting(n -> n.path("kind").asText()).as("only ConfigMaps: no Deployment, no Redis")
        .containsOnly("ConfigMap");
    JsonNode snippet = configMap(rendered, "-sidecar-snippet");
    Container c = YamlDocuments.YAML.readValue(snippet.at("/data/initContainer.yaml").asText(), Container.class);
    assertThat(c.getName()).isEqualTo(KubernetesManifests.EXTPROC_CONTAINER);
    assertThat(c.getImage()).isEqualTo(KubernetesManifests.EXTPROC_IMAGE);
    assertThat(c.getRestartPolicy()).as("a native sidecar").isEqualTo("Always");
    assertThat(c.getStartupProbe()).isNull();
    assertThat(c.getReadinessProbe()).isNull();
    assertThat(c.getLivenessProbe()).isNull();
    assertThat(env(c, "DISAGG_USAGE_ON_STARTUP_FAILURE")).isEqualTo("idle");
    assertThat(env(c, "JAVA_TOOL_OPTIONS")).contains("-Xmx256m", "-XX:MaxDirectMemorySize=128m");
    assertThat(c.getSecurityContext().getRunAsNonRoot()).isTrue();
    assertThat(c.getSecurityContext().getReadOnlyRootFilesystem()).isTrue();
    assertThat(c.getSecurityContext().getAllowPrivilegeEscalation()).isFalse();
    assertThat(c.getSecurityContext().getCapabilities().getDrop()).contains("ALL");
    assertThat(c.getSecurityContext().getSeccompProfile().getType()).isEqualTo("RuntimeDefault");

    List<Volume> volumes = List.of(YamlDocuments.YAML.readValue(snippet.at("/data/volumes.yaml").asText(), Volume[].class));
    String tmp = c.getVolumeMounts().stream().filter(m -> m.getMountPath().equals("/tmp")).findFirst().orElseThrow().getName();
    assertThat(volumes).filteredOn(v -> v.getName().equals(tmp)).singleElement()
        .satisfies(v -> assertThat(v.getEmptyDir()).isNotNull());
    String configVolume = c.getVolumeMounts().stream().filter(m -> m.getMountPath().equals("/etc/disagg-usage"))
        .findFirst().orElseThrow().getName();
    String configMapName = volumes.stream().filter(v -> v.getName().equals(configVolume)).findFirst().orElseThrow()
        .getConfigMap().getName();
    JsonNode config = YamlDocuments.YAML.readTree(configMap(rendered, "-config").at("/data/config.yaml").asText());
    assertThat(configMap(rendered, "-config").at("/metadata/name").asText()).isEqualTo(configMapName);
    assertThat(config.at("/store/type").asText()).as("one process sees both legs").isEqualTo("memory");
    assertThat(KubernetesPolicies.unknownConfigKeys(config)).isEmpty();
  }

  @Test
  void monitorsSelectTheServiceAndItsPodsOnTheMetricsPort() {
    List<JsonNode> rendered = HelmChart.rendered("monitored");
    JsonNode deployment = rendered.stream().filter(n -> n.path("kind").asText().equals("Deployment")
        && n.at("/metadata/name").asText().equals(HelmChart.RELEASE)).findFirst().orElseThrow();
    JsonNode podLabels = deployment.at("/spec/template/metadata/labels");
    for (String kind : List.of("ServiceMonitor", "PodMonitor")) {
      JsonNode monitor = rendered.stream().filter(n -> n.path("kind").asText().equals(kind)).findFirst().orElseThrow();
      monitor.at("/spec/selector/matchLabels").fields().forEachRemaining(
          e -> assertThat(podLabels.path(e.getKey()).asText()).as(kind + " selects " + e.getKey()).isEqualTo(e.getValue().asText()));
      JsonNode endpoint = monitor.at(kind.equals("ServiceMonitor") ? "/spec/endpoints/0" : "/spec/podMetricsEndpoints/0");
      assertThat(endpoint.path("port").asText()).isEqualTo("http-metrics");
      assertThat(endpoint.path("path").asText()).isEqualTo("/metrics");
    }
  }

  private static JsonNode configMap(List<JsonNode> rendered, String suffix) {
    return rendered.stream().filter(n -> n.path("kind").asText().equals("ConfigMap")
        && n.at("/metadata/name").asText().endsWith(suffix)).findFirst().orElseThrow();
  }

  private static String env(Container c, String name) {
    return c.getEnv().stream().filter(e -> e.getName().equals(name)).map(EnvVar::getValue).findFirst().orElse(null);
  }
}
