package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.InstalledTools;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;

/**
 * Where the end-to-end suite finds the programs it starts: {@link InstalledTools} (shared with the
 * benchmarks) plus what only this suite starts. A missing one fails the test that needs it with the
 * command that installs it — never a skip.
 */
public final class Tools {
  private Tools() {}

  /** The repository root (the parent of the e2e module). */
  public static Path root() {
    return InstalledTools.root();
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
    return installerSetting("(?m)^envoy_releases=\\(([^)]*)\\)", "envoy_releases=(...)");
  }

  /** The first group of {@code pattern} in scripts/install-test-tools, which pins every tool's version. */
  private static String installerSetting(String pattern, String what) {
    Path script = root().resolve("scripts/install-test-tools");
    try {
      java.util.regex.Matcher m = java.util.regex.Pattern.compile(pattern).matcher(Files.readString(script));
      if (!m.find()) {
        throw new IllegalStateException(script + " no longer has an " + what + " line");
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
    return InstalledTools.envoy(release);
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

  /**
   * SMG, the Shepherd Model Gateway (PyPI's smg, pinned in e2e/smg-requirements.txt): a wrapper running its
   * {@code smg} console script.
   */
  public static Path smg() {
    return installed("smg", "SMG (smg)");
  }

  /** llm-d's {@code pd-sidecar}, built with Go from llm-d-inference-scheduler at the version the installer pins. */
  public static Path pdSidecar() {
    return installed("pd-sidecar", "llm-d's pd-sidecar");
  }

  /**
   * llm-d's coordinator (llm-d-router v0.10.0, {@code cmd/coordinator}), built with Go from the vendored source snapshot
   * ({@code ../shared/vendor/llm-d-router-v0.10.0.tar.gz}) by the installer.
   */
  public static Path llmdCoordinator() {
    return installed("llmd-coordinator", "llm-d's coordinator (llm-d-router v0.10.0)");
  }

  /** llm-d's endpoint picker, an Envoy ext_proc server (llm-d-router v0.10.0, {@code cmd/epp}), built as the coordinator. */
  public static Path llmdEpp() {
    return installed("llmd-epp", "llm-d's EPP (llm-d-router v0.10.0)");
  }

  /** llm-d-router v0.10.0's {@code pd-sidecar}, built as the coordinator; {@link #pdSidecar()} is the v0.7.1 one. */
  public static Path llmdPdSidecar() {
    return installed("llmd-pd-sidecar", "llm-d-router v0.10.0's pd-sidecar");
  }

  /** The OpenTelemetry Collector built from scripts/otelcol (OTLP receiver, file exporter). */
  public static Path otelcol() {
    return installed("otelcol", "the OpenTelemetry Collector (scripts/otelcol)");
  }

  /** Envoy Gateway's controller ({@code envoy-gateway}, built with Go at the version egctl has). */
  public static Path envoyGateway() {
    return installed("envoy-gateway", "Envoy Gateway's controller (envoy-gateway)");
  }

  /**
   * The Envoy release Envoy Gateway runs through func-e (the one its default image names), as the
   * installer pins it ({@code envoy_gateway_envoy=...}); {@link #envoy(String)} finds its binary.
   */
  public static String envoyGatewayEnvoyRelease() {
    return installerSetting("(?m)^envoy_gateway_envoy=([0-9.]+)", "envoy_gateway_envoy=...");
  }

  /**
   * istiod's {@code pilot-discovery}, built from the istio.io/istio version istioctl is pinned to, with the two nil
   * checks it needs without a Kubernetes client (scripts/install-test-tools says which).
   */
  public static Path pilotDiscovery() {
    return installed("pilot-discovery", "istiod (pilot-discovery)");
  }

  public static Path curl() {
    Path curl = Path.of("/usr/bin/curl");
    if (!Files.isExecutable(curl)) {
      throw new AssertionError("curl is not installed: apt-get install curl");
    }
    return curl;
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

  /** The folder {@code name} beside the logs, emptied of a previous run's files. */
  public static Path emptyFolder(String name) {
    Path folder = logs().resolve(name);
    try {
      if (Files.isDirectory(folder)) {
        try (var files = Files.list(folder)) {
          for (Path file : files.toList()) {
            Files.delete(file);
          }
        }
      }
      Files.createDirectories(folder);
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    return folder;
  }

  /**
   * E2E_PYTHON_CLIENTS=/path/to/python, E2E_REDIS_SERVER, E2E_VLLM_ROUTER, E2E_SGLANG_ROUTER, E2E_SMG, E2E_PD_SIDECAR, E2E_LLMD_COORDINATOR,
   * E2E_LLMD_EPP, E2E_LLMD_PD_SIDECAR and E2E_VLLM_PYTHON point a test at a program installed elsewhere.
   */
  private static Path installed(String name, String what) {
    return InstalledTools.installed(name, what);
  }
}
