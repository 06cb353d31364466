package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * One version everywhere (CHANGELOG.md, "the version scheme"): the Maven project version is the tag of
 * every image reference the project ships (manifests, READMEs, docs) and so of the image image/pom.xml builds, its
 * version label, and a CHANGELOG section; the project is Apache-2.0 in the pom and in LICENSE.
 */
class ReleaseVersionTest {
  private static final Pattern PROJECT_VERSION =
      Pattern.compile("<artifactId>disagg-usage-extproc-parent</artifactId>\\s*<version>([^<]+)</version>");
  private static final Pattern IMAGE = Pattern.compile("disagg-usage-extproc:(\\d+\\.\\d+\\.\\d+[\\w.\\-]*)");
  private static final Pattern NEW_TAG = Pattern.compile("name: ghcr\\.io/disagg-usage/disagg-usage-extproc\\s+newTag: (\\S+)");
  private static final Set<String> SKIPPED_DIRS = Set.of("target", ".git", ".tools", "node_modules");

  static String projectVersion() throws IOException {
    Matcher m = PROJECT_VERSION.matcher(Files.readString(ProjectFiles.resolve("pom.xml")));
    assertThat(m.find()).as("the parent pom's version").isTrue();
    return m.group(1);
  }

  @Test
  void versionIsSemantic() throws IOException {
    assertThat(projectVersion()).matches("\\d+\\.\\d+\\.\\d+(-[0-9A-Za-z.]+)?");
  }

  @Test
  void everyShippedImageReferenceCarriesTheProjectVersion() throws IOException {
    String version = projectVersion();
    List<String> found = new ArrayList<>();
    for (Path file : shippedTextFiles()) {
      String text = Files.readString(file);
      Matcher image = IMAGE.matcher(text);
      while (image.find()) {
        found.add(ProjectFiles.relative(file) + ": " + image.group(1));
      }
      Matcher tag = NEW_TAG.matcher(text);
      while (tag.find()) {
        found.add(ProjectFiles.relative(file) + ": " + tag.group(1));
      }
    }
    assertThat(found).as("image tags in the shipped files").hasSizeGreaterThan(8)
        .allSatisfy(ref -> assertThat(ref).endsWith(": " + version));
  }

  @Test
  void helmChartVersionAndAppVersionAreTheProjectVersion() throws IOException {
    JsonNode chart = YamlDocuments.single(ProjectFiles.resolve("deploy/helm/disagg-usage-extproc/Chart.yaml"));
    assertThat(chart.path("version").asText()).isEqualTo(projectVersion());
    assertThat(chart.path("appVersion").asText()).isEqualTo(projectVersion());
  }

  @Test
  void changelogHasASectionForTheProjectVersion() throws IOException {
    assertThat(Files.readString(ProjectFiles.resolve("CHANGELOG.md")))
        .contains("\n## [" + projectVersion().replace("-SNAPSHOT", "") + "] - ");
  }

  @Test
  void projectIsApacheLicensed() throws IOException {
    assertThat(Files.readString(ProjectFiles.resolve("LICENSE")))
        .contains("Apache License").contains("Version 2.0, January 2004");
    assertThat(Files.readString(ProjectFiles.resolve("pom.xml"))).contains("<name>Apache-2.0</name>");
    assertThat(Files.readString(ProjectFiles.resolve("NOTICE"))).startsWith("disagg-usage-extproc\n");
    assertThat(ProjectFiles.resolve("SECURITY.md")).exists();
  }

  /** README, docs, deploy and istio: what a user copies from. */
  static List<Path> shippedTextFiles() throws IOException {
    List<Path> files = new ArrayList<>();
    files.add(ProjectFiles.resolve("README.md"));
    for (String dir : List.of("deploy", "istio", "docs")) {
      try (Stream<Path> walk = Files.walk(ProjectFiles.resolve(dir))) {
        walk.filter(Files::isRegularFile)
            .filter(f -> SKIPPED_DIRS.stream().noneMatch(d -> ("/" + ProjectFiles.relative(f)).contains("/" + d + "/")))
            .filter(f -> f.toString().matches(".*\\.(md|yaml|yml)$"))
            .forEach(files::add);
      }
    }
    return files;
  }
}
