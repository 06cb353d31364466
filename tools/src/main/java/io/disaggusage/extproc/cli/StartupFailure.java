package io.disaggusage.extproc.cli;

import io.disaggusage.extproc.config.ConfigException;
import io.disaggusage.extproc.config.ConfigLoader;
import java.io.PrintWriter;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

/**
 * What the server does when its configuration is invalid or it cannot start ({@code
 * --on-startup-failure}, env {@value ConfigLoader#ENV_ON_STARTUP_FAILURE}).
 *
 * <p>{@link #EXIT} is what a command line wants. {@link #IDLE} is for a container in a pod that carries
 * LLM traffic (beside an orchestrator, in a gateway pod): a container that exits is restarted and, while
 * it waits in back-off, is not ready, and that makes the whole pod unready — the LLM traffic pays for a
 * usage-accounting mistake. Idle, the process prints the same message, serves nothing and waits for
 * SIGTERM or SIGINT: Envoy finds no listener and passes traffic through unchanged
 * ({@code failure_mode_allow}), the pod stays ready, and the log and the missing metrics say why.
 */
public enum StartupFailure {
  EXIT,
  IDLE;

  /**
   * The flag's value, else the environment's, else {@link #EXIT}.
   *
   * @throws ConfigException naming the flag or variable when the value is neither {@code exit} nor
   *     {@code idle}
   */
  public static StartupFailure of(String flag, Map<String, String> env) throws ConfigException {
    String origin = flag != null ? "--on-startup-failure" : "environment variable " + ConfigLoader.ENV_ON_STARTUP_FAILURE;
    String value = flag != null ? flag : env.get(ConfigLoader.ENV_ON_STARTUP_FAILURE);
    if (value == null || value.isBlank()) {
      return EXIT;
    }
    return switch (value.trim().toLowerCase(Locale.ROOT)) {
      case "exit" -> EXIT;
      case "idle" -> IDLE;
      default -> throw new ConfigException(
          "on-startup-failure: '" + value.trim() + "' is neither exit nor idle (" + origin + ")");
    };
  }

  /**
   * Prints {@code message} and, for {@link #IDLE}, waits for SIGTERM or SIGINT serving nothing; returns
   * {@code status} either way.
   */
  public int fail(String message, int status, PrintWriter err) throws InterruptedException {
    err.println(message);
    if (this == EXIT) {
      err.flush();
      return status;
    }
    err.println("idle (--on-startup-failure=idle): serving nothing, so Envoy passes traffic through unchanged;"
        + " exits with status " + status + " on SIGTERM or SIGINT");
    err.flush();
    CountDownLatch stop = new CountDownLatch(1);
    try (Signals signals = Signals.onTermination(signal -> stop.countDown())) {
      stop.await();
    }
    return status;
  }
}
