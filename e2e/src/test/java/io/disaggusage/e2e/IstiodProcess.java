package io.disaggusage.e2e;

import com.fasterxml.jackson.databind.JsonNode;
import io.disaggusage.extproc.testkit.ChildProcess;
import io.disaggusage.extproc.testkit.FreePorts;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * istiod ({@code pilot-discovery}) without Kubernetes, on loopback: no service registry of its own
 * ({@code --registries ""}), its Istio configuration read from a folder it watches, its mesh configuration from a
 * file it watches too. Proxies reach it over plaintext ADS ({@link #xdsPort()}). No webhooks run (no TLS
 * port), so istiod's {@code /ready} never turns 200: it is up when its discovery port accepts.
 */
final class IstiodProcess extends ChildProcess {
  /**
   * Istio-only filters upstream Envoy does not have: the metadata exchange and the ALPN override istiod would add
   * for its own proxy build.
   */
  static final Map<String, String> UPSTREAM_ENVOY = Map.of(
      "PILOT_ENABLE_METADATA_EXCHANGE", "false", "PILOT_ENABLE_ALPN_FILTER", "false");
  private static final Pattern REJECTS = Pattern.compile("(?m)^pilot_total_xds_rejects(?:\\{[^}]*\\})? ([0-9.eE+]+)$");

  private final Path configDir;
  private final Path staging;
  private final int xdsPort = FreePorts.next();
  private final int debugPort = FreePorts.next();
  private final int monitoringPort = FreePorts.next();

  private IstiodProcess(String name, Path configDir, Path staging) {
    super(name, Tools.logs().resolve(name + ".log"), Duration.ofSeconds(5));
    this.configDir = configDir;
    this.staging = staging;
  }

  /**
   * Starts istiod on a config folder holding {@code files} (file name to YAML) and the mesh configuration
   * {@code meshConfig}; waits until its discovery port accepts.
   */
  static IstiodProcess start(String name, Map<String, String> files, String meshConfig) {
    Path root = Tools.logs().resolve(name);
    IstiodProcess istiod = new IstiodProcess(name, root.resolve("config"), root.resolve("staging"));
    try {
      deleteTree(root);
      Files.createDirectories(istiod.configDir);
      Files.createDirectories(istiod.staging);
      Files.writeString(root.resolve("mesh.yaml"), meshConfig);
      Files.deleteIfExists(istiod.log());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    files.forEach(istiod::put);
    List<String> command = List.of(Tools.pilotDiscovery().toString(), "discovery",
        "--registries", "", "--configDir", istiod.configDir.toString(), "--meshConfig", root.resolve("mesh.yaml").toString(),
        "--grpcAddr", "127.0.0.1:" + istiod.xdsPort, "--secureGRPCAddr", "", "--httpsAddr", "",
        "--httpAddr", "127.0.0.1:" + istiod.debugPort, "--monitoringAddr", "127.0.0.1:" + istiod.monitoringPort,
        "--ctrlz_address", "127.0.0.1", "--ctrlz_port", Integer.toString(FreePorts.next()));
    istiod.launch(command, UPSTREAM_ENVOY);
    try {
      istiod.await("discovery port", Duration.ofSeconds(60), () -> FreePorts.accepts(istiod.xdsPort));
    } catch (RuntimeException | AssertionError e) {
      istiod.close();
      throw e;
    }
    return istiod;
  }

  int xdsPort() {
    return xdsPort;
  }

  /** Writes (or replaces) one file of the watched folder whole: written aside, then moved in. */
  void put(String file, String yaml) {
    try {
      Path aside = Files.writeString(staging.resolve(file), yaml);
      Files.move(aside, configDir.resolve(file), StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Removes one file from the watched folder (nothing when it is not there). */
  void remove(String file) {
    try {
      Files.deleteIfExists(configDir.resolve(file));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * What istiod knows of its proxies' answers that is not a clean ACK: per proxy and xDS type, a resource sent
   * but not acknowledged, or the error of a NACK ({@code /debug/syncz}). Empty once every proxy took
   * everything.
   */
  List<String> unacknowledged() {
    List<String> problems = new ArrayList<>();
    JsonNode proxies = json(Http.body("http://127.0.0.1:" + debugPort + "/debug/syncz"));
    proxies.forEach(proxy -> proxy.path("resources").fields().forEachRemaining(type -> {
      JsonNode status = type.getValue();
      String where = proxy.path("proxy").asText() + " " + type.getKey();
      if (!status.path("lastError").asText().isEmpty()) {
        problems.add(where + " NACK: " + status.path("lastError").asText());
      } else if (!status.path("sent").asText().equals(status.path("acked").asText())) {
        problems.add(where + " sent " + status.path("sent").asText() + ", acked " + status.path("acked").asText());
      }
    }));
    return problems;
  }

  /** {@code pilot_total_xds_rejects}: the xDS responses proxies rejected since istiod started. */
  long rejects() {
    Matcher m = REJECTS.matcher(Http.body("http://127.0.0.1:" + monitoringPort + "/metrics"));
    long total = 0;
    while (m.find()) {
      total += (long) Double.parseDouble(m.group(1));
    }
    return total;
  }

  private static JsonNode json(String text) {
    try {
      return ShippedBootstrap.YAML.readTree(text);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static void deleteTree(Path root) throws IOException {
    if (!Files.exists(root)) {
      return;
    }
    try (java.util.stream.Stream<Path> paths = Files.walk(root)) {
      for (Path p : paths.sorted(java.util.Comparator.reverseOrder()).toList()) {
        Files.delete(p);
      }
    }
  }
}
