package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * What the deployment READMEs state about the manifests is true of the manifests: every port and
 * namespace they name occurs in the shipped YAML, and no README or doc calls a feature unsupported
 * that the suite proves works (the stale claims an adopter once found are named here).
 */
class DeployDocsTest {
  private static final Pattern PORT = Pattern.compile("(?:port|ports|:)[ `]*(\\d{4,5})\\b");
  private static final Pattern NAMESPACE = Pattern.compile("namespace `([a-z0-9-]+)`|`namespace: ([a-z0-9-]+)`|-n ([a-z0-9-]+)\\b");
  /** Claims that were once written and were false; a doc saying them again is wrong again. */
  private static final List<String> STALE_CLAIMS = List.of(
      "not yet supported", "not correlated yet", "engine-formats release", "with Unix-socket support",
      "MessagePack is unsupported", "arrays are not correlated");

  static List<Path> deployReadmes() throws IOException {
    List<Path> out = new ArrayList<>(List.of(ProjectFiles.resolve("istio/README.md")));
    try (Stream<Path> walk = Files.walk(ProjectFiles.resolve("deploy"))) {
      walk.filter(p -> p.getFileName().toString().equals("README.md")).sorted().forEach(out::add);
    }
    return out;
  }

  /** All text of the YAML the project ships (manifests, bootstraps, EnvoyFilters, the chart). */
  static String shippedYaml() throws IOException {
    StringBuilder all = new StringBuilder();
    for (String dir : List.of("deploy", "istio")) {
      try (Stream<Path> walk = Files.walk(ProjectFiles.resolve(dir))) {
        for (Path p : walk.filter(f -> f.toString().endsWith(".yaml") || f.toString().endsWith(".conf")).toList()) {
          all.append(Files.readString(p)).append('\n');
        }
      }
    }
    return all.toString();
  }

  @Test
  void everyPortADeployReadmeNamesIsInTheShippedYaml() throws IOException {
    String yaml = shippedYaml();
    Named ports = named(PORT, port -> Pattern.compile("\\b" + port + "\\b").matcher(yaml).find());
    assertThat(ports.count()).as("ports named in the deploy READMEs").isGreaterThan(20);
    assertThat(ports.missing()).as("ports named in a README but in no shipped YAML").isEmpty();
  }

  @Test
  void everyNamespaceADeployReadmeNamesIsOneTheManifestsUse() throws IOException {
    String yaml = shippedYaml();
    Named namespaces = named(NAMESPACE, ns ->
        Pattern.compile("(namespace: |kubernetes.io/metadata.name: |values: \\[[^\\]]*)" + ns + "\\b").matcher(yaml).find());
    assertThat(namespaces.count()).as("namespaces named in the deploy READMEs").isGreaterThan(3);
    assertThat(namespaces.missing()).as("namespaces named in a README that no manifest uses").isEmpty();
  }

  /** How many names {@code pattern} found in the deploy READMEs, and those {@code inYaml} rejects. */
  record Named(int count, Set<String> missing) {}

  private static Named named(Pattern pattern, java.util.function.Predicate<String> inYaml) throws IOException {
    Set<String> missing = new TreeSet<>();
    int count = 0;
    for (Path readme : deployReadmes()) {
      Matcher m = pattern.matcher(Files.readString(readme));
      while (m.find()) {
        String name = firstGroup(m);
        count++;
        if (!inYaml.test(name)) {
          missing.add(ProjectFiles.relative(readme) + ": " + name);
        }
      }
    }
    return new Named(count, missing);
  }

  /** The first capturing group that matched (the patterns are alternations of one group each). */
  private static String firstGroup(Matcher m) {
    for (int g = 1; g <= m.groupCount(); g++) {
      if (m.group(g) != null) {
        return m.group(g);
      }
    }
    throw new IllegalStateException("no group matched: " + m.group());
  }

  @Test
  void noDocCallsAWorkingFeatureUnsupported() throws IOException {
    List<Path> docs = new ArrayList<>(deployReadmes());
    docs.add(ProjectFiles.resolve("README.md"));
    try (Stream<Path> walk = Files.list(ProjectFiles.resolve("docs"))) {
      walk.filter(p -> p.toString().endsWith(".md")).forEach(docs::add);
    }
    List<String> found = new ArrayList<>();
    for (Path doc : docs) {
      String text = Files.readString(doc).replaceAll("\\s+", " ");
      for (String claim : STALE_CLAIMS) {
        if (text.contains(claim)) {
          found.add(ProjectFiles.relative(doc) + ": \"" + claim + "\"");
        }
      }
    }
    assertThat(found).isEmpty();
  }

  /** The README's Limits name what does not work; none of them may say "unsupported" of anything. */
  @Test
  void readmeLimitsListNoUnsupportedFeature() throws IOException {
    String readme = Files.readString(ProjectFiles.resolve("README.md"));
    int start = readme.indexOf("\n## Limits\n");
    String limits = readme.substring(start, readme.indexOf("\n## ", start + 5));
    assertThat(limits).doesNotContain("not supported").doesNotContain("unsupported").doesNotContain("not yet")
        .doesNotContain("roadmap");
  }
}
