package io.disaggusage.e2e;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;

/**
 * Where the end-to-end suite finds the programs it starts. {@code scripts/install-test-tools} installs
 * them, pinned, under the git-ignored {@code .tools/bin}; a missing one fails the test that needs it with
 * the command that installs it — never a skip.
 */
public final class Tools {
  private static final String INSTALL =
      "run scripts/install-test-tools (installs the pinned Envoy releases, SDK clients, P/D routers, pd-sidecar and"
          + " redis-server into .tools/)";

  private Tools() {}

  /** The repository root (the parent of the e2e module). */
  public static Path root() {
    String root = System.getProperty("project.root");
    if (root == null) {
      return Path.of("..").toAbsolutePath().normalize();
    }
    return Path.of(root).toAbsolutePath().normalize();
  }

  /**
   * The Envoy releases every test runs on: those {@code scripts/install-test-tools} pins (its
   * {@code envoy_releases=(...)} line, as deploy-validation reads it, so the two never drift), or the
   * comma-separated {@code -De2e.envoy.releases=...}.
   */
  public static List<String> envoyReleases() {
    String chosen = System.getProperty("e2e.envoy.releases", "");
    String releases = chosen.isBlank() || chosen.startsWith("${") ? pinnedReleases() : chosen.replace(',', ' ');
    return Arrays.stream(releases.trim().split("\\s+")).filter(s -> !s.isEmpty()).toList();
  }

  private static String pinnedReleases() {
    Path script = root().resolve("scripts/install-test-tools");
    try {
      java.util.regex.Matcher m = java.util.regex.Pattern.compile("(?m)^envoy_releases=\\(([^)]*)\\)").matcher(Files.readString(script));
      if (!m.find()) {
        throw new IllegalStateException(script + " no longer has an envoy_releases=(...) line");
      }
      return m.group(1);
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  /** {@link #envoyReleases()} as a {@code @MethodSource("io.disaggusage.e2e.Tools#releases")}. */
  public static java.util.stream.Stream<String> releases() {
    return envoyReleases().stream();
  }

  /** Every release with every item, as {@code @MethodSource} arguments (release, item). */
  public static java.util.stream.Stream<org.junit.jupiter.params.provider.Arguments> perRelease(List<?> items) {
    return releases().flatMap(r -> items.stream().map(item -> org.junit.jupiter.params.provider.Arguments.of(r, item)));
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

  /** The Python of the virtualenv holding the official OpenAI and Anthropic SDKs. */
  public static Path pythonClients() {
    return installed("python-clients", "the OpenAI/Anthropic Python SDK virtualenv");
  }

  /** vllm-project/router's {@code vllm-router} (PyPI wheel, pinned in e2e/vllm-router-requirements.txt). */
  public static Path vllmRouter() {
    return installed("vllm-router", "vllm-router");
  }

  /**
   * sgl-model-gateway's router (PyPI's sglang-router, pinned in e2e/sglang-router-requirements.txt): a wrapper
   * running {@code python -m sglang_router.launch_router}.
   */
  public static Path sglangRouter() {
    return installed("sglang-router", "sglang-router");
  }

  /** llm-d's {@code pd-sidecar}, built with Go from llm-d-inference-scheduler at the version the installer pins. */
  public static Path pdSidecar() {
    return installed("pd-sidecar", "llm-d's pd-sidecar");
  }

  public static Path redisServer() {
    return installed("redis-server", "redis-server");
  }

  public static Path curl() {
    Path curl = Path.of("/usr/bin/curl");
    if (!Files.isExecutable(curl)) {
      throw new AssertionError("curl is not installed: apt-get install curl");
    }
    return curl;
  }

  /** The service as shipped: the jar {@code mvn package} builds. */
  public static Path serviceJar() {
    Path jar = root().resolve("tools/target/disagg-usage-extproc.jar");
    if (!Files.isRegularFile(jar)) {
      throw new AssertionError(jar + " is missing: build it with mvn -B -DskipTests package (mvn verify builds it first)");
    }
    return jar;
  }

  /** The class-data archive the build records beside the shipped jar (tools/pom.xml). */
  public static Path serviceClassArchive() {
    Path archive = root().resolve("tools/target/disagg-usage-extproc.jsa");
    if (!Files.isRegularFile(archive)) {
      throw new AssertionError(archive + " is missing: mvn -B -DskipTests package records it beside the jar");
    }
    return archive;
  }

  /** The shipped Envoy bootstrap the tests run, rewriting only ports and addresses. */
  public static Path shippedBootstrap() {
    return root().resolve("deploy/envoy/envoy.yaml");
  }

  /** A folder for this run's process logs, kept for a failure's post-mortem. */
  public static Path logs() {
    Path dir = root().resolve("e2e/target/e2e-logs");
    try {
      Files.createDirectories(dir);
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    return dir;
  }

  private static Path installed(String name, String what) {
    Path override = envOverride(name);
    return executable(override != null ? override : root().resolve(".tools/bin").resolve(name), what);
  }

  private static Path executable(Path path, String what) {
    if (!Files.isExecutable(path)) {
      throw new AssertionError(what + " is not installed (" + path + "): " + INSTALL);
    }
    return path;
  }

  /**
   * E2E_PYTHON_CLIENTS=/path/to/python, E2E_REDIS_SERVER, E2E_VLLM_ROUTER, E2E_SGLANG_ROUTER and E2E_PD_SIDECAR
   * point a test at a program installed elsewhere.
   */
  private static Path envOverride(String name) {
    String value = System.getenv("E2E_" + name.toUpperCase(java.util.Locale.ROOT).replaceAll("[^A-Z0-9]", "_"));
    return value == null || value.isBlank() ? null : Path.of(value);
  }
}
