package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Istio's own analyzers ({@code istioctl analyze --use-kube=false}, the pinned build of
 * scripts/install-test-tools) on the EnvoyFilters of istio/ together with each rendered kustomize overlay
 * and Helm variant, as they would meet in one cluster: no message at all, not even a warning.
 */
class IstioctlAnalyzeTest {
  @TempDir Path dir;

  static Stream<KubernetesManifests.Rendering> renderings() {
    return KubernetesManifests.renderings().stream();
  }

  static List<String> istioFiles() {
    return ProjectFiles.yamlFiles("istio").stream().map(ProjectFiles::relative).toList();
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("renderings")
  void istioFiltersAndTheRenderedManifestsRaiseNoIssue(KubernetesManifests.Rendering rendering) throws IOException {
    Path manifests = dir.resolve("rendered.yaml");
    StringBuilder yaml = new StringBuilder();
    for (KubernetesManifests.Source s : rendering.sources()) {
      yaml.append("---\n").append(YamlDocuments.YAML.writeValueAsString(s.node()));
    }
    Files.writeString(manifests, yaml);
    List<String> args = new ArrayList<>(List.of("analyze", "--use-kube=false"));
    args.addAll(istioFiles());
    args.add(manifests.toString());

    GoTools.Run run = GoTools.run(GoTools.ISTIOCTL, args);

    assertThat(run.exitCode()).as(run.output()).isZero();
    assertThat(run.output()).as(run.output()).contains("No validation issues found")
        .doesNotContain("Warning").doesNotContain("Error").doesNotContain("could not be parsed");
  }

  /** The analysis reads the filters: one with a misspelled patch operation fails it. */
  @Test
  void aBrokenEnvoyFilterFailsTheAnalysis() throws IOException {
    Path broken = dir.resolve("gateway.yaml");
    Files.writeString(broken, Files.readString(ProjectFiles.resolve("istio/gateway.yaml"))
        .replace("operation: INSERT_BEFORE", "operation: INSERT_BEFOR"));
    GoTools.Run run = GoTools.run(GoTools.ISTIOCTL, List.of("analyze", "--use-kube=false", broken.toString()));
    assertThat(run.exitCode()).as(run.output()).isNotZero();
    assertThat(run.output()).contains("INSERT_BEFOR");
  }

  @Test
  void theInstalledIstioctlIsThePinnedBuild() throws IOException {
    String pin = GoTools.version(GoTools.ISTIOCTL);
    assertThat(Files.readString(ProjectFiles.resolve(EnvoyBinaries.INSTALLER))).contains("istioctl_version=" + pin + "\n");
  }
}
