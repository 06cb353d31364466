package io.disaggusage.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Where a benchmark runs: the checkout it reads the shipped files from, and the machine its tables name.
 * Shared by the benchmark table and the run through real Envoy.
 */
public final class BenchHost {
  private BenchHost() {}

  /**
   * The end-to-end runs read the shipped Envoy config (and the Envoy run the installed tools and the
   * shipped jar): find the checkout from here upwards unless {@code project.root} says where it is.
   */
  public static void locateProjectRoot() {
    if (System.getProperty("project.root") != null) {
      return;
    }
    Path dir = Path.of("").toAbsolutePath();
    while (dir != null) {
      if (Files.isRegularFile(dir.resolve("deploy/envoy/envoy.yaml"))) {
        System.setProperty("project.root", dir.toString());
        return;
      }
      dir = dir.getParent();
    }
    throw new IllegalStateException("run from inside the checkout: deploy/envoy/envoy.yaml not found above "
        + Path.of("").toAbsolutePath());
  }

  /** "2 CPUs (model name)". */
  public static String machine() {
    return Runtime.getRuntime().availableProcessors() + " CPUs (" + cpuModel() + ")";
  }

  private static String cpuModel() {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/cpuinfo"))) {
        if (line.startsWith("model name")) {
          return line.substring(line.indexOf(':') + 1).trim();
        }
      }
    } catch (IOException | RuntimeException e) {
      // not Linux: the model stays unknown
    }
    return "unknown CPU";
  }
}
