package io.disaggusage.deploy;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The Go-built validators scripts/install-test-tools pins and builds into {@code .tools/go/bin} (each
 * with a {@code .<name>-version} stamp), and a way to run them. A missing one fails the test with the
 * command that installs it, never a skip.
 */
final class GoTools {
  /** kustomize, as {@code kubectl apply -k} runs it. */
  static final String KUSTOMIZE = "kustomize";
  /** istioctl from istio.io/istio at the pseudo-version the Go module proxy serves (1.31-dev). */
  static final String ISTIOCTL = "istioctl";
  /** Envoy Gateway's egctl, for {@code egctl x translate}. */
  static final String EGCTL = "egctl";

  private static final long TIMEOUT_SECONDS = 120;

  /**
   * What one run printed, stdout and stderr apart (a machine-readable stdout stays parseable whatever
   * the tool logs), and its exit code.
   */
  record Run(int exitCode, String stdout, String stderr) {
    /** Both streams, for messages and for tools that report on either. */
    String output() {
      return stdout + stderr;
    }
  }

  private GoTools() {}

  /** The installed binary; fails with the installer's name when it is missing. */
  static Path binary(String name) {
    Path binary = ProjectFiles.resolve(".tools/go/bin/" + name);
    if (!Files.isExecutable(binary)) {
      throw new AssertionError(name + " is missing at " + ProjectFiles.relative(binary) + ": run "
          + EnvoyBinaries.INSTALLER + " (it builds the pinned release with Go)");
    }
    return binary;
  }

  /** The version the installer stamped beside the binary. */
  static String version(String name) {
    try {
      return Files.readString(ProjectFiles.resolve(".tools/go/bin/." + name + "-version")).strip();
    } catch (IOException e) {
      throw new AssertionError(name + " has no version stamp: run " + EnvoyBinaries.INSTALLER, e);
    }
  }

  /** Runs {@code name} with {@code args} from the project root. */
  static Run run(String name, List<String> args) {
    List<String> command = new java.util.ArrayList<>(List.of(binary(name).toString()));
    command.addAll(args);
    try {
      Path out = Files.createTempFile(name, ".out");
      Path err = Files.createTempFile(name, ".err");
      try {
        Process p = new ProcessBuilder(command).directory(ProjectFiles.root().toFile())
            .redirectOutput(out.toFile()).redirectError(err.toFile()).start();
        p.getOutputStream().close();
        if (!p.waitFor(TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
          p.destroyForcibly();
          throw new AssertionError(String.join(" ", command) + " did not finish in " + TIMEOUT_SECONDS + " s");
        }
        return new Run(p.exitValue(), Files.readString(out, StandardCharsets.UTF_8),
            Files.readString(err, StandardCharsets.UTF_8));
      } finally {
        Files.deleteIfExists(out);
        Files.deleteIfExists(err);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }
}
