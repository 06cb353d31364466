package io.disaggusage.deploy;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;

/** Where the shipped files are: the repository root, deploy/, istio/, and the shared CRD schemas. */
final class ProjectFiles {
  private ProjectFiles() {}

  /** The repository root (set by Maven; falls back to the parent of the working directory). */
  static Path root() {
    String configured = System.getProperty("project.root");
    Path root = configured != null ? Path.of(configured) : Path.of("..");
    return root.toAbsolutePath().normalize();
  }

  static Path resolve(String relative) {
    return root().resolve(relative);
  }

  /** The Helm chart: templates and values, not manifests; {@link HelmChart} renders them. */
  static final String HELM_DIR = "deploy/helm";

  /**
   * Every {@code .yaml}/{@code .yml} file below {@code dir} (relative to the root), sorted; the Helm
   * chart's files excepted.
   */
  static List<Path> yamlFiles(String dir) {
    Path base = resolve(dir);
    if (!Files.isDirectory(base)) {
      return List.of();
    }
    try (Stream<Path> files = Files.walk(base)) {
      return files
          .filter(Files::isRegularFile)
          .filter(p -> p.toString().endsWith(".yaml") || p.toString().endsWith(".yml"))
          .filter(p -> !p.toAbsolutePath().normalize().startsWith(resolve(HELM_DIR).toAbsolutePath().normalize()))
          .sorted()
          .toList();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * The CRD schemas kept beside the repository (never copied into it). Absent on a user's fresh clone,
   * present in CI.
   */
  static Optional<Path> sharedSchemas() {
    Path dir = root().resolve("../shared/schemas").normalize();
    return Files.isDirectory(dir) ? Optional.of(dir) : Optional.empty();
  }

  static String relative(Path file) {
    return root().relativize(file.toAbsolutePath().normalize()).toString();
  }
}
