package io.disaggusage.deploy;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

/**
 * {@code envoy --mode validate -c FILE}: Envoy loads the bootstrap as it would to serve (every field,
 * every extension's own checks, listeners, routes against the clusters they name, TLS files), then
 * exits without binding a port. It needs no {@code --base-id}: validate mode takes no hot-restart
 * shared memory, so any number of runs share a machine with each other and with serving Envoys.
 * It does not check that an {@code envoy_grpc} cluster exists, nor resolve DNS.
 */
final class EnvoyValidateMode {
  /** Log lines at warning and above; a deprecated field is reported as a warning. */
  private static final Pattern COMPLAINT = Pattern.compile("\\]\\[(warning|error|critical)\\]");
  private static final long TIMEOUT_SECONDS = 60;

  /** What Envoy said about one file. */
  record Verdict(int exitCode, String output) {
    boolean accepted() {
      return exitCode == 0;
    }

    /** The warning, error and critical lines (deprecated fields among them). */
    List<String> complaints() {
      return output.lines().filter(l -> COMPLAINT.matcher(l).find()).toList();
    }
  }

  private EnvoyValidateMode() {}

  static Verdict run(Path envoy, Path bootstrap) throws IOException, InterruptedException {
    Path log = Files.createTempFile("envoy-validate", ".log");
    try {
      Process process =
          new ProcessBuilder(envoy.toString(), "--mode", "validate", "-c", bootstrap.toString(), "--log-level", "warning")
              .redirectErrorStream(true)
              .redirectOutput(log.toFile())
              .start();
      if (!process.waitFor(TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
        process.destroyForcibly();
        throw new AssertionError(envoy + " --mode validate did not finish in " + TIMEOUT_SECONDS + " s");
      }
      return new Verdict(process.exitValue(), Files.readString(log, StandardCharsets.UTF_8));
    } finally {
      Files.deleteIfExists(log);
    }
  }
}
