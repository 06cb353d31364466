package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Envoy Gateway's own translation of deploy/envoy-gateway/ ({@code egctl x translate}, v1.9.0 as
 * scripts/install-test-tools pins it), beside a cluster's Gateway, the route the policies target and
 * its Services (test resource envoy-gateway/cluster.yaml) and, for the central policy, the Service the
 * central overlay renders: every object accepted, the generated listener carries the ext_proc filter
 * as the policy says, and the whole translated configuration passes {@code envoy --mode validate} of
 * each pinned Envoy release.
 */
class EgctlTranslateTest {
  @TempDir Path dir;

  static Stream<String> policyFiles() {
    return ProjectFiles.yamlFiles(EnvoyGatewayPolicyTest.DIR).stream().map(ProjectFiles::relative);
  }

  static Stream<Arguments> policyFilesAndReleases() {
    return policyFiles().flatMap(f -> EnvoyBinaries.releases().stream().map(r -> Arguments.of(f, r)));
  }

  /** The cluster fixture, the policy file and (when the policy calls a Service) the central Service. */
  Path input(String policyFile) throws IOException {
    StringBuilder yaml = new StringBuilder(Files.readString(ProjectFiles.resolve(
        "deploy-validation/src/test/resources/envoy-gateway/cluster.yaml")));
    yaml.append("\n---\n").append(Files.readString(ProjectFiles.resolve(policyFile)));
    if (Files.readString(ProjectFiles.resolve(policyFile)).contains("kind: Service\n")) {
      Path central = ProjectFiles.resolve(KubernetesManifests.OVERLAYS + "/central");
      for (KubernetesManifests.Source s : KubernetesManifests.renderedSources(central)) {
        if (s.typeKey().equals("v1/Service") && s.node().at("/metadata/name").asText().equals("disagg-usage-extproc")) {
          ObjectNode service = s.node().deepCopy();
          ((ObjectNode) service.path("spec")).put("clusterIP", "10.0.0.20"); // as the API server assigns one
          yaml.append("\n---\n").append(YamlDocuments.YAML.writeValueAsString(service));
        }
      }
    }
    Path file = dir.resolve("input.yaml");
    Files.writeString(file, yaml);
    return file;
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("policyFiles")
  void envoyGatewayAcceptsEveryObject(String policyFile) throws IOException {
    GoTools.Run run = GoTools.run(GoTools.EGCTL, List.of("x", "translate", "--to", "gateway-api", "-o", "json",
        "-f", input(policyFile).toString()));
    assertThat(run.exitCode()).as(run.output()).isZero();
    JsonNode statuses = YamlDocuments.JSON.readTree(run.stdout());
    List<String> conditions = new ArrayList<>();
    collectConditions(statuses, "", conditions);
    assertThat(conditions).as("status conditions").isNotEmpty()
        .allSatisfy(c -> assertThat(c).as(c).doesNotContain("status=False"));
    assertThat(conditions).as("the policy").anyMatch(c -> c.contains("Accepted status=True") && c.contains("Policy"));
  }

  @ParameterizedTest(name = "{0} on Envoy {1}")
  @MethodSource("policyFilesAndReleases")
  void theTranslatedConfigurationPassesEnvoysValidateMode(String policyFile, String release) throws Exception {
    GoTools.Run run = GoTools.run(GoTools.EGCTL, List.of("x", "translate", "--to", "xds", "-o", "json",
        "-f", input(policyFile).toString()));
    assertThat(run.exitCode()).as(run.output()).isZero();
    ObjectNode bootstrap = XdsDumpBootstrap.of(YamlDocuments.JSON.readTree(run.stdout()));
    String text = YamlDocuments.JSON.writeValueAsString(bootstrap);
    assertThat(text).as("the ext_proc filter the policy asks for")
        .contains("\"name\":\"envoy.filters.http.ext_proc/envoyextensionpolicy/llm/")
        .contains("\"failureModeAllow\":true").contains("\"allowModeOverride\":true");
    Path file = dir.resolve("bootstrap.json");
    Files.writeString(file, text);
    EnvoyValidateMode.Verdict verdict = EnvoyValidateMode.run(EnvoyBinaries.locate(release), file);
    assertThat(verdict.accepted()).as(verdict.output()).isTrue();
  }

  /** The status check has teeth: the central policy without the Service it calls is not accepted. */
  @Test
  void aPolicyWhoseServiceIsMissingIsReported() throws IOException {
    Path file = dir.resolve("no-service.yaml");
    Files.writeString(file, Files.readString(ProjectFiles.resolve("deploy-validation/src/test/resources/envoy-gateway/cluster.yaml"))
        + "\n---\n" + Files.readString(ProjectFiles.resolve(EnvoyGatewayPolicyTest.DIR + "/extension-policy.yaml")));
    GoTools.Run run = GoTools.run(GoTools.EGCTL, List.of("x", "translate", "--to", "gateway-api", "-o", "json",
        "-f", file.toString()));
    List<String> conditions = new ArrayList<>();
    collectConditions(YamlDocuments.JSON.readTree(run.stdout()), "", conditions);
    assertThat(conditions).anyMatch(c -> c.startsWith("EnvoyExtensionPolicy/") && c.contains("status=False"));
  }

  @Test
  void theInstalledEgctlIsThePinnedRelease() throws IOException {
    assertThat(GoTools.version(GoTools.EGCTL)).isEqualTo("v1.9.0");
    assertThat(Files.readString(ProjectFiles.resolve(EnvoyBinaries.INSTALLER))).contains("egctl_version=v1.9.0\n");
  }

  /** "kind/name type status=..." for every condition in egctl's status output. */
  private static void collectConditions(JsonNode node, String where, List<String> out) {
    if (node.isObject()) {
      String here = node.has("kind") ? node.path("kind").asText() + "/" + node.at("/metadata/name").asText() : where;
      for (JsonNode condition : node.path("conditions")) {
        out.add(here + " " + condition.path("type").asText() + " status=" + condition.path("status").asText()
            + " (" + condition.path("message").asText() + ")");
      }
      node.fields().forEachRemaining(e -> {
        if (!e.getKey().equals("conditions")) {
          collectConditions(e.getValue(), here, out);
        }
      });
    } else if (node.isArray()) {
      node.elements().forEachRemaining(e -> collectConditions(e, where, out));
    }
  }
}
