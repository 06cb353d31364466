package io.disaggusage.deploy;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The real Envoy releases the configurations are judged by, and where their binaries are. The releases
 * are the ones {@code scripts/install-test-tools} pins (read from the script, so the two never drift);
 * it installs them as {@code .tools/bin/envoy-<release>} at the repository root.
 */
final class EnvoyBinaries {
  static final String INSTALLER = "scripts/install-test-tools";
  private static final Pattern PINNED = Pattern.compile("(?m)^envoy_releases=\\(([^)]*)\\)");

  private EnvoyBinaries() {}

  /** The pinned releases, newest first as the script lists them. */
  static List<String> releases() {
    Path script = ProjectFiles.resolve(INSTALLER);
    try {
      Matcher m = PINNED.matcher(Files.readString(script));
      if (!m.find()) {
        throw new IllegalStateException(INSTALLER + " no longer has an envoy_releases=(...) line");
      }
      return Arrays.stream(m.group(1).trim().split("\\s+")).toList();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * The binary of {@code release}: the system property {@code envoy.binary.<release>}, else the
   * environment variable {@code ENVOY_BINARY_<release with _ for .>}, else {@code .tools/bin/envoy-<release>}.
   * A missing binary is a failure, never a skip: these checks are the only ones a real Envoy makes.
   */
  static Path locate(String release) {
    String override = System.getProperty("envoy.binary." + release);
    if (override == null) {
      override = System.getenv("ENVOY_BINARY_" + release.replace('.', '_'));
    }
    Path binary = override != null ? Path.of(override) : ProjectFiles.resolve(".tools/bin/envoy-" + release);
    if (!Files.isExecutable(binary)) {
      throw new AssertionError(
          "Envoy " + release + " is not installed at " + binary + ": run " + INSTALLER
              + " (or point -Denvoy.binary." + release + " / ENVOY_BINARY_" + release.replace('.', '_')
              + " at an Envoy " + release + " binary)");
    }
    return binary;
  }
}
