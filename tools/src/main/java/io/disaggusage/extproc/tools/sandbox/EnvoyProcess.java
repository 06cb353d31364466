package io.disaggusage.extproc.tools.sandbox;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.disaggusage.extproc.runtime.StartupException;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A real Envoy as a child process: started on a bootstrap file, its application log and access log
 * (stdout) in one file, its shared-memory base id chosen by Envoy among the unused ones
 * ({@code --use-dynamic-base-id}) so it never collides with another Envoy on the machine. {@link
 * #close()} stops it (SIGTERM, then SIGKILL after a grace period); until then a shutdown hook of its
 * own sends the SIGTERM if the JVM exits first, so Envoy never outlives it (short of a SIGKILL).
 */
final class EnvoyProcess implements AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Duration POLL = Duration.ofMillis(50);
  private static final Duration STOP_GRACE = Duration.ofSeconds(5);
  /** Log lines shown when Envoy does not come up. */
  private static final int LOG_TAIL_LINES = 15;

  private final Process process;
  private final Thread exitHook;
  private final Path logFile;
  private final URI admin;
  private final Map<String, Integer> listenerPorts;
  private final String version;

  private EnvoyProcess(
      Process process, Thread exitHook, Path logFile, URI admin, Map<String, Integer> listenerPorts, String version) {
    this.process = process;
    this.exitHook = exitHook;
    this.logFile = logFile;
    this.admin = admin;
    this.listenerPorts = Map.copyOf(listenerPorts);
    this.version = version;
  }

  /**
   * Writes {@code bootstrapYaml} to {@code dir/envoy.yaml}, starts Envoy on it and waits until its admin
   * says it is ready ({@code /ready}: clusters initialised, listeners bound).
   *
   * @throws StartupException when Envoy exits, or is not ready within {@code readyTimeout}; the message
   *     carries the end of its log
   */
  static EnvoyProcess start(EnvoyBinary binary, String bootstrapYaml, Path dir, Duration readyTimeout)
      throws StartupException, IOException {
    Path bootstrap = Files.writeString(dir.resolve("envoy.yaml"), bootstrapYaml);
    Path adminAddress = dir.resolve("admin-address");
    Path logFile = dir.resolve("envoy.log");
    Process process =
        new ProcessBuilder(
                binary.path().toString(),
                "-c", bootstrap.toString(),
                "--use-dynamic-base-id",
                "--base-id-path", dir.resolve("base-id").toString(),
                "--admin-address-path", adminAddress.toString(),
                // one user's curl calls: one worker thread is plenty and starts fastest
                "--concurrency", "1",
                // access-log lines show up while the user looks (the default holds them up to 10 s)
                "--file-flush-interval-msec", "250")
            .redirectErrorStream(true)
            .redirectOutput(logFile.toFile())
            .start();
    Thread exitHook = new Thread(process::destroy, "disagg-usage-sandbox-envoy-exit");
    Runtime.getRuntime().addShutdownHook(exitHook);
    try {
      HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(1)).build();
      URI admin = awaitReady(process, client, adminAddress, logFile, readyTimeout);
      return new EnvoyProcess(process, exitHook, logFile, admin, listenerPorts(client, admin), version(client, admin));
    } catch (StartupException | IOException | RuntimeException e) {
      stop(process, exitHook);
      throw e;
    } catch (InterruptedException e) {
      stop(process, exitHook);
      Thread.currentThread().interrupt();
      throw new StartupException("interrupted while Envoy started", e);
    }
  }

  /** Envoy's admin interface, e.g. {@code http://127.0.0.1:18006/}. */
  URI admin() {
    return admin;
  }

  /** The file with Envoy's log and its access log (one line per request, no bodies). */
  Path logFile() {
    return logFile;
  }

  /** The release, e.g. {@code 1.40.0}. */
  String version() {
    return version;
  }

  /** The port Envoy bound for listener {@code name}. */
  int listenerPort(String name) {
    Integer port = listenerPorts.get(name);
    if (port == null) {
      throw new IllegalArgumentException("Envoy has no listener named " + name);
    }
    return port;
  }

  @Override
  public void close() {
    stop(process, exitHook);
  }

  private static void stop(Process process, Thread exitHook) {
    try {
      Runtime.getRuntime().removeShutdownHook(exitHook);
    } catch (IllegalStateException e) {
      // the JVM is exiting: the hook has run or is running, and this stop does the same
    }
    process.destroy();
    try {
      if (!process.waitFor(STOP_GRACE.toMillis(), TimeUnit.MILLISECONDS)) {
        process.destroyForcibly().waitFor(STOP_GRACE.toMillis(), TimeUnit.MILLISECONDS);
      }
    } catch (InterruptedException e) {
      process.destroyForcibly();
      Thread.currentThread().interrupt();
    }
  }

  /** Polls for the admin address Envoy writes, then its {@code /ready}, until ready, exited or too late. */
  private static URI awaitReady(Process process, HttpClient client, Path adminAddress, Path logFile, Duration timeout)
      throws StartupException, InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (System.nanoTime() < deadline) {
      if (!process.isAlive()) {
        throw new StartupException(
            "Envoy exited with status " + process.exitValue() + " before it was ready; " + logEnd(logFile));
      }
      String address = readIfPresent(adminAddress);
      if (!address.isEmpty()) {
        URI admin = URI.create("http://" + address + "/");
        try {
          HttpResponse<String> ready = get(client, admin.resolve("ready"));
          if (ready.statusCode() == 200) {
            return admin;
          }
        } catch (IOException e) {
          // the admin address is written as the admin listener opens; try again
        }
      }
      Thread.sleep(POLL.toMillis());
    }
    throw new StartupException("Envoy was not ready after " + timeout.toSeconds() + " s; " + logEnd(logFile));
  }

  /** Listener name to bound port, from {@code /listeners} (which also covers ports Envoy picked). */
  private static Map<String, Integer> listenerPorts(HttpClient client, URI admin)
      throws IOException, InterruptedException {
    JsonNode listeners = JSON.readTree(get(client, admin.resolve("listeners?format=json")).body());
    Map<String, Integer> ports = new HashMap<>();
    for (JsonNode status : listeners.path("listener_statuses")) {
      JsonNode socket = status.path("local_address").path("socket_address");
      ports.put(status.path("name").asText(), socket.path("port_value").asInt());
    }
    return ports;
  }

  /** The release from {@code /server_info}'s version, e.g. {@code <commit>/1.40.0/Clean/RELEASE/BoringSSL}. */
  private static String version(HttpClient client, URI admin) throws IOException, InterruptedException {
    String full = JSON.readTree(get(client, admin.resolve("server_info")).body()).path("version").asText();
    String[] parts = full.split("/");
    return parts.length > 1 ? parts[1] : full;
  }

  private static HttpResponse<String> get(HttpClient client, URI uri) throws IOException, InterruptedException {
    return client.send(
        HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(2)).build(),
        HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
  }

  private static String readIfPresent(Path file) {
    try {
      return Files.readString(file).trim();
    } catch (IOException e) {
      return "";
    }
  }

  /** The last lines of Envoy's log, introduced by its path. */
  private static String logEnd(Path logFile) {
    try {
      List<String> lines = Files.readAllLines(logFile, StandardCharsets.UTF_8);
      return "its log (" + logFile + ") ends:\n"
          + String.join("\n", lines.subList(Math.max(0, lines.size() - LOG_TAIL_LINES), lines.size()));
    } catch (IOException e) {
      return "its log (" + logFile + ") is unreadable: " + e.getMessage();
    }
  }
}
