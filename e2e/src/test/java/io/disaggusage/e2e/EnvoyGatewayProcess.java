package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.AccessLogLine;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.disaggusage.extproc.testkit.ChildProcess;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Envoy Gateway's controller run standalone, as its docs describe running it without Kubernetes: the
 * File provider reading a folder of Gateway API and Envoy Gateway objects (watched: a changed file is
 * read again while the proxy runs), the host infrastructure starting Envoy as a child process through
 * func-e, the Backend and EnvoyPatchPolicy APIs enabled. It binds 0.0.0.0 on fixed ports, so it runs in
 * a {@link NetworkNamespace}; everything else it writes goes to a folder under the e2e logs.
 *
 * <p>func-e runs the Envoy release Envoy Gateway's default image names from
 * {@code <dataHome>/envoy-versions/<release>/bin/envoy}; that is a link to the installed binary, so
 * nothing is downloaded. Envoy's stdout — where the access log of the EnvoyProxy's File sink
 * {@code /dev/stdout} lands — is Envoy Gateway's. Object statuses, which a Kubernetes provider writes to
 * the API server, are logged by the File provider; {@link #statuses()} reads them back.
 */
final class EnvoyGatewayProcess extends ChildProcess {
  /** One object's latest logged status: its conditions as "Type status=... reason=... (message)". */
  record ObjectStatus(String kind, String key, List<String> conditions) {}

  private static final ObjectMapper JSON = new ObjectMapper();
  /** The File provider's status log: a console line, the status as YAML, then a tab and the JSON fields. */
  private static final Pattern STATUS =
      Pattern.compile("Got new status for (\\w+)\\n(.*?)\\n\\t(\\{[^\\n]*\\})", Pattern.DOTALL);

  private final NetworkNamespace namespace;
  private final Path home;
  private final Path resources;
  private final Path stdout;

  private EnvoyGatewayProcess(NetworkNamespace namespace, Path home) {
    super("envoy-gateway", home.resolve("envoy-gateway.err"), Duration.ofSeconds(15));
    this.namespace = namespace;
    this.home = home;
    this.resources = home.resolve("resources");
    this.stdout = home.resolve("envoy-gateway.out");
  }

  /**
   * Starts Envoy Gateway in {@code namespace} on the objects of {@code files} (file name to YAML) and
   * waits until its Envoy is LIVE.
   */
  static EnvoyGatewayProcess start(String name, NetworkNamespace namespace, Map<String, String> files) {
    Path home = Tools.logs().resolve(name);
    EnvoyGatewayProcess eg = new EnvoyGatewayProcess(namespace, home);
    try {
      deleteRecursively(home);
      Files.createDirectories(eg.resources);
      Path envoy = home.resolve("data/envoy-versions/" + Tools.envoyGatewayEnvoyRelease() + "/bin/envoy");
      Files.createDirectories(envoy.getParent());
      Files.createSymbolicLink(envoy, Tools.envoy(Tools.envoyGatewayEnvoyRelease()));
      Path config = home.resolve("envoy-gateway.yaml");
      Files.writeString(config, eg.configuration());
      eg.apply(files);
      Path certgenLog = home.resolve("certgen.log");
      ChildProcess certgen = new ChildProcess("envoy-gateway certgen", certgenLog, Duration.ofSeconds(5));
      certgen.launch(List.of(Tools.envoyGateway().toString(), "certgen", "--local",
          "--config-home", home.resolve("config").toString()));
      if (certgen.awaitExit(Duration.ofSeconds(60)) != 0) {
        throw new AssertionError("envoy-gateway certgen --local failed: " + Files.readString(certgenLog));
      }
      eg.launch(namespace.inside(List.of(Tools.envoyGateway().toString(), "server",
          "--config-path", config.toString())), Map.of(), eg.stdout);
      eg.await("its Envoy LIVE", Duration.ofSeconds(60), () -> {
        if (!eg.isAlive()) { // its own log and the Envoy's it started, interleaved
          throw new AssertionError("envoy-gateway exited: " + eg.tail());
        }
        return eg.adminAddress().map(a -> eg.admin("/ready").strip().equals("LIVE")).orElse(false);
      });
      return eg;
    } catch (IOException e) {
      eg.close();
      throw new UncheckedIOException(e);
    } catch (RuntimeException | AssertionError e) {
      eg.close();
      throw e;
    }
  }

  /**
   * The EnvoyGateway configuration: the Custom provider with File resources and Host infrastructure,
   * every folder of it under this run's home; Backend and EnvoyPatchPolicy enabled, as the shipped
   * files require.
   */
  private String configuration() {
    return """
        apiVersion: gateway.envoyproxy.io/v1alpha1
        kind: EnvoyGateway
        gateway:
          controllerName: gateway.envoyproxy.io/gatewayclass-controller
        provider:
          type: Custom
          custom:
            resource:
              type: File
              file:
                paths: ["%s"]
            infrastructure:
              type: Host
              host:
                configHome: "%s"
                dataHome: "%s"
                stateHome: "%s"
                runtimeDir: "%s"
        logging:
          level:
            default: info
        extensionApis:
          enableBackend: true
          enableEnvoyPatchPolicy: true
        """.formatted(resources, home.resolve("config"), home.resolve("data"), home.resolve("state"), home.resolve("run"));
  }

  /**
   * Makes the watched folder hold exactly {@code files}: each written whole and moved in at once (the
   * watcher never reads half a file), files not named removed.
   */
  void apply(Map<String, String> files) {
    try {
      for (Map.Entry<String, String> file : files.entrySet()) {
        Path target = resources.resolve(file.getKey());
        if (Files.exists(target) && Files.readString(target).equals(file.getValue())) {
          continue;
        }
        Path staged = home.resolve(file.getKey() + ".staged");
        Files.writeString(staged, file.getValue());
        Files.move(staged, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      }
      try (Stream<Path> present = Files.list(resources)) {
        for (Path file : present.toList()) {
          if (!files.containsKey(file.getFileName().toString())) {
            Files.delete(file);
          }
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** A URL on the Gateway's listener {@code port}, as a client outside the namespace reaches it. */
  String listenerUrl(int port, String path) {
    return "http://" + namespace.namespaceAddress() + ":" + port + path;
  }

  /** The proxy's admin address (127.0.0.1 and a port Envoy picked, inside the namespace), once written. */
  private Optional<String> adminAddress() {
    try (Stream<Path> runs = Files.isDirectory(home.resolve("run")) ? Files.list(home.resolve("run")) : Stream.empty()) {
      Optional<Path> file = runs.map(run -> run.resolve("admin-address.txt")).filter(Files::isRegularFile)
          .max(java.util.Comparator.comparing(Path::toString));
      return file.map(f -> {
        try {
          return Files.readString(f).strip();
        } catch (IOException e) {
          throw new UncheckedIOException(e);
        }
      }).filter(a -> !a.isEmpty());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** GET {@code path} of the proxy's admin, from inside the namespace (its admin listens on loopback). */
  String admin(String path) {
    String address = adminAddress().orElseThrow(() -> new AssertionError("Envoy Gateway's Envoy has no admin address yet"));
    return namespace.run(List.of(Tools.curl().toString(), "-sS", "--max-time", "5", "http://" + address + path));
  }

  /** Every counter and gauge of the proxy whose name starts with {@code prefix}. */
  Map<String, Long> stats(String prefix) {
    return EnvoyProcess.counters(admin("/stats?filter=" + java.net.URLEncoder.encode(prefix, StandardCharsets.UTF_8)), prefix);
  }

  /** Every {@code *.update_rejected} counter of the proxy: a configuration Envoy refused (a NACK) counts there. */
  Map<String, Long> rejectedUpdates() {
    Map<String, Long> rejected = new LinkedHashMap<>();
    EnvoyProcess.counters(admin("/stats?filter=update_rejected"), "").forEach((name, value) -> {
      if (name.endsWith(".update_rejected")) {
        rejected.put(name, value);
      }
    });
    return rejected;
  }

  /** The proxy's configuration as Envoy holds it ({@code /config_dump}). */
  JsonNode configDump() {
    try {
      return JSON.readTree(admin("/config_dump"));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The access log lines (the shipped format, which starts with the time in brackets) Envoy wrote so far. */
  List<AccessLogLine> accessLog() {
    return output().lines().filter(line -> line.startsWith("[") && line.contains(" cluster=")).map(AccessLogLine::parse).toList();
  }

  /** The latest status the File provider logged for each object, by {@code kind/namespace/name}. */
  Map<String, ObjectStatus> statuses() {
    Map<String, ObjectStatus> latest = new LinkedHashMap<>();
    Matcher m = STATUS.matcher(output());
    while (m.find()) {
      try {
        String key = JSON.readTree(m.group(3)).path("key").asText();
        List<String> conditions = new ArrayList<>();
        collectConditions(ShippedBootstrap.YAML.readTree(m.group(2)), conditions);
        latest.put(m.group(1) + "/" + key, new ObjectStatus(m.group(1), key, conditions));
      } catch (IOException e) {
        throw new UncheckedIOException("unreadable status: " + m.group(), e);
      }
    }
    return latest;
  }

  private static void collectConditions(JsonNode node, List<String> out) {
    if (node == null) {
      return;
    }
    for (JsonNode condition : node.path("conditions")) {
      out.add(condition.path("type").asText() + " status=" + condition.path("status").asText() + " reason="
          + condition.path("reason").asText() + " (" + condition.path("message").asText() + ")");
    }
    node.fields().forEachRemaining(e -> {
      if (!e.getKey().equals("conditions")) {
        collectConditions(e.getValue(), out);
      }
    });
    if (node.isArray()) {
      node.forEach(child -> collectConditions(child, out));
    }
  }

  private String output() {
    try {
      return Files.readString(stdout, StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The last lines of Envoy Gateway's output and of its Envoy's log, for failure messages. */
  String tail() {
    try {
      List<String> lines = Files.readAllLines(stdout, StandardCharsets.UTF_8);
      String err = Files.readString(log(), StandardCharsets.UTF_8);
      return String.join("\n", lines.subList(Math.max(0, lines.size() - 40), lines.size())) + "\n" + err;
    } catch (IOException e) {
      return "(no log: " + e.getMessage() + ")";
    }
  }

  private static void deleteRecursively(Path dir) throws IOException {
    if (!Files.exists(dir, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
      return;
    }
    try (Stream<Path> walk = Files.walk(dir)) {
      for (Path p : walk.sorted(java.util.Comparator.reverseOrder()).toList()) {
        Files.delete(p);
      }
    }
  }
}
