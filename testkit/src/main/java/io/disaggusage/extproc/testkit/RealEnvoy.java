package io.disaggusage.extproc.testkit;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * A real Envoy binary run by a test or a benchmark: serving a bootstrap file until closed ({@link #start}),
 * or judging one ({@link #validate}). A serving Envoy runs with hot restart disabled, so several run side by
 * side with no shared-memory base id to choose; it counts as started once its admin port answers
 * {@code /ready} with 200 (clusters initialised, listeners bound).
 */
public final class RealEnvoy extends ChildProcess {
  /** How long a serving Envoy may take to be ready. */
  public static final Duration READY_TIMEOUT = Duration.ofSeconds(30);
  private static final Duration STOP_GRACE = Duration.ofSeconds(5);
  /** How long {@code --mode validate} may take; it parses the file and exits. */
  private static final Duration VALIDATE_TIMEOUT = Duration.ofSeconds(60);

  private final int adminPort;

  private RealEnvoy(String name, Path log, int adminPort) {
    super(name, log, STOP_GRACE);
    this.adminPort = adminPort;
  }

  /** {@link #start(String, Path, Path, int, Path, Path, List)} with its stdout discarded and no further flags. */
  public static RealEnvoy start(String name, Path binary, Path config, int adminPort, Path log) {
    return start(name, binary, config, adminPort, log, null, List.of());
  }

  /**
   * Starts {@code binary -c config --disable-hot-restart flags...}, its own log appended to {@code log} and its
   * stdout (where the shipped bootstrap writes the access log) to {@code stdout} (null: discarded); returns once
   * the admin on {@code adminPort} (the one {@code config} names) is ready.
   *
   * @throws IllegalStateException when Envoy exits or is not ready in {@link #READY_TIMEOUT}; the message
   *     carries the end of its log
   */
  public static RealEnvoy start(
      String name, Path binary, Path config, int adminPort, Path log, Path stdout, List<String> flags) {
    List<String> command = new ArrayList<>(List.of(binary.toString(), "-c", config.toString(), "--disable-hot-restart"));
    command.addAll(flags);
    RealEnvoy envoy = new RealEnvoy(name, log, adminPort);
    envoy.launch(command, Map.of(), stdout);
    try {
      envoy.await("admin /ready", READY_TIMEOUT, () -> envoy.admin("/ready") != null);
      return envoy;
    } catch (RuntimeException e) {
      envoy.close();
      throw e;
    }
  }

  public int adminPort() {
    return adminPort;
  }

  /** {@code http://127.0.0.1:<admin port><path>}. */
  public String adminUrl(String path) {
    return "http://127.0.0.1:" + adminPort + path;
  }

  /** The body of an admin GET, or null when the admin does not answer 200. */
  public String admin(String path) {
    return LoopbackGet.body(adminPort, path);
  }

  /**
   * {@code envoy --mode validate -c bootstrap --log-level warning}: Envoy loads the bootstrap as it would to
   * serve (every field, every extension's own checks, listeners, routes against the clusters they name, TLS
   * files), then exits without binding a port. It takes no hot-restart shared memory, so any number of runs
   * share a machine with each other and with serving Envoys. It does not check that an {@code envoy_grpc}
   * cluster exists, nor resolve DNS.
   */
  public static Verdict validate(Path binary, Path bootstrap) {
    Path log;
    try {
      log = Files.createTempFile("envoy-validate", ".log");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    try (ChildProcess envoy = new ChildProcess(binary + " --mode validate", log, STOP_GRACE)) {
      envoy.launch(List.of(binary.toString(), "--mode", "validate", "-c", bootstrap.toString(), "--log-level", "warning"));
      int exitCode = envoy.awaitExit(VALIDATE_TIMEOUT);
      return new Verdict(exitCode, Files.readString(log, StandardCharsets.UTF_8));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } finally {
      try {
        Files.deleteIfExists(log);
      } catch (IOException e) {
        // a leftover temporary log is harmless
      }
    }
  }

  /** What {@code --mode validate} said about one file. */
  public record Verdict(int exitCode, String output) {
    /** Log lines at warning and above; a deprecated field is reported as a warning. */
    private static final Pattern COMPLAINT = Pattern.compile("\\]\\[(warning|error|critical)\\]");

    public boolean accepted() {
      return exitCode == 0;
    }

    /** The warning, error and critical lines (deprecated fields among them). */
    public List<String> complaints() {
      return output.lines().filter(l -> COMPLAINT.matcher(l).find()).toList();
    }
  }
}
