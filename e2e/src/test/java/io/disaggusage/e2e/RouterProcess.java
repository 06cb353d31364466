package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.ChildProcess;
import io.disaggusage.extproc.testkit.FreePorts;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/**
 * A real P/D router on a free loopback port, its output in {@code e2e/target/e2e-logs/<name>.log}.
 * sglang-router loads a tokenizer for the model the workers report and downloads it from the Hugging Face
 * hub when it is no local folder (a warning, routing works without it); {@code HF_ENDPOINT} sends that
 * request to a closed loopback port, so a test never leaves the machine.
 */
final class RouterProcess extends ChildProcess {
  /** Where the routers' Hugging Face client is sent: a loopback port nothing listens on (discard). */
  private static final java.util.Map<String, String> OFFLINE = java.util.Map.of("HF_ENDPOINT", "http://127.0.0.1:9");

  private final int port;

  private RouterProcess(String name, Path log, int port) {
    super(name, log, Duration.ofSeconds(5));
    this.port = port;
  }

  /**
   * Starts {@code kind} in front of the two URLs, registers them through its API when it takes its workers that
   * way ({@link RouterKind#registrations}), and waits until it is ready ({@link RouterKind#readinessPath}).
   */
  static RouterProcess start(String name, RouterKind kind, String prefillUrl, int bootstrapPort, String decodeUrl) {
    Path log = Tools.logs().resolve(name + ".log");
    RouterProcess router = new RouterProcess(name, log, FreePorts.next());
    try {
      Files.deleteIfExists(log);
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    List<String> command = kind.command(router.port, FreePorts.next(), prefillUrl, bootstrapPort, decodeUrl);
    router.launch(command, OFFLINE);
    try {
      List<String> registrations = kind.registrations(prefillUrl, bootstrapPort, decodeUrl);
      if (!registrations.isEmpty()) { // workers named through the router's API, once it listens
        router.await("/health", Duration.ofSeconds(60), () -> Http.ok(router.url("/health")));
        for (String worker : registrations) {
          java.net.http.HttpResponse<String> answer = Http.postJson(router.url("/workers"), worker);
          if (answer == null || answer.statusCode() / 100 != 2) {
            throw new AssertionError(name + " refused the worker " + worker + ": "
                + (answer == null ? "no answer" : answer.statusCode() + " " + answer.body()));
          }
        }
      }
      router.await(kind.readinessPath(), Duration.ofSeconds(60), () -> Http.ok(router.url(kind.readinessPath())));
    } catch (RuntimeException | AssertionError e) {
      router.close();
      throw e;
    }
    return router;
  }

  String url(String path) {
    return "http://127.0.0.1:" + port + path;
  }

  /** The router's port on loopback. */
  int port() {
    return port;
  }
}
