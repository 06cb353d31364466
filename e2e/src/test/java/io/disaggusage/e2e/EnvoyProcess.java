package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.AccessLogLine;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.testkit.RealEnvoy;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import io.disaggusage.extproc.testkit.ShippedBootstrap.Topology;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A real Envoy release running the shipped bootstrap with a test's ports. Its access log (the shipped
 * stdout logger) lands in a file the test reads; its admin port answers {@code /stats} and
 * {@code /clusters}. {@link RealEnvoy} starts it.
 */
final class EnvoyProcess implements AutoCloseable {
  private final String release;
  private final Topology topology;
  private final Path accessLog;
  private final RealEnvoy envoy;

  private EnvoyProcess(String release, Topology topology, Path accessLog, RealEnvoy envoy) {
    this.release = release;
    this.topology = topology;
    this.accessLog = accessLog;
    this.envoy = envoy;
  }

  /** Starts Envoy {@code release} on the shipped bootstrap and waits until its admin says LIVE. */
  static EnvoyProcess start(String name, String release, Topology topology) {
    return start(name, release, ShippedBootstrap.rewrite(Tools.shippedBootstrap(), topology), topology);
  }

  /** Starts Envoy on a bootstrap the caller derived from the shipped one. */
  static EnvoyProcess start(String name, String release, ObjectNode bootstrap, Topology topology) {
    return start(name, release, bootstrap, topology, List.of());
  }

  /** {@link #start(String, String, ObjectNode, Topology)} with {@code options} added to Envoy's command line. */
  static EnvoyProcess start(String name, String release, ObjectNode bootstrap, Topology topology, List<String> options) {
    Path dir = Tools.logs();
    Path config = dir.resolve(name + ".yaml");
    Path accessLog = dir.resolve(name + ".access.log");
    Path log = dir.resolve(name + ".envoy.log");
    try {
      Files.writeString(config, ShippedBootstrap.yaml(bootstrap));
      Files.deleteIfExists(accessLog);
      Files.deleteIfExists(log);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    // access-log lines within 20 ms of the exchange, and the ext_proc filter's own account in the log
    List<String> flags = new ArrayList<>(List.of(
        "--file-flush-interval-msec", "20", "-l", "info", "--component-log-level", "ext_proc:debug"));
    flags.addAll(options);
    RealEnvoy envoy = RealEnvoy.start("Envoy " + release + " " + name, Tools.envoy(release), config,
        topology.adminPort(), log, accessLog, flags);
    return new EnvoyProcess(release, topology, accessLog, envoy);
  }

  String release() {
    return release;
  }

  String contextUrl(String path) {
    return "http://127.0.0.1:" + topology.contextListener() + path;
  }

  String generationUrl(String path) {
    return "http://127.0.0.1:" + topology.generationListener() + path;
  }

  String adminUrl(String path) {
    return envoy.adminUrl(path);
  }

  /** Waits until every ext_proc endpoint passed its active health check. */
  void awaitExtProcHealthy(Duration timeout) {
    Processes.await("ext_proc hosts healthy in Envoy " + release, timeout, () -> unhealthyExtProcHosts() == 0);
  }

  /** How many ext_proc cluster hosts Envoy does not consider healthy. */
  long unhealthyExtProcHosts() {
    long unhealthy = 0;
    for (String line : Http.body(adminUrl("/clusters")).split("\n")) {
      if (line.startsWith("disagg_usage_extproc::") && line.contains("::health_flags::")) {
        unhealthy += line.endsWith("::healthy") ? 0 : 1;
      }
    }
    return unhealthy;
  }

  /** Every counter and gauge whose name starts with {@code prefix}. */
  Map<String, Long> stats(String prefix) {
    return counters(Http.body(adminUrl("/stats?filter=" + prefix)), prefix);
  }

  /** The counters and gauges of an admin {@code /stats} answer whose names start with {@code prefix}. */
  static Map<String, Long> counters(String statsText, String prefix) {
    Map<String, Long> stats = new LinkedHashMap<>();
    for (String line : statsText.split("\n")) {
      int colon = line.lastIndexOf(": ");
      if (colon > 0 && line.startsWith(prefix)) {
        try {
          stats.put(line.substring(0, colon), Long.parseLong(line.substring(colon + 2).trim()));
        } catch (NumberFormatException histogram) {
          // histograms print quantiles, not a number
        }
      }
    }
    return stats;
  }

  /** The access log lines written so far. */
  List<AccessLogLine> accessLog() {
    try {
      return Files.readAllLines(accessLog, StandardCharsets.UTF_8).stream()
          .filter(line -> line.startsWith("["))
          .map(AccessLogLine::parse)
          .toList();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The access log lines written so far for exchanges routed to {@code cluster}. */
  List<AccessLogLine> accessLog(String cluster) {
    return accessLog().stream().filter(l -> l.cluster().equals(cluster)).toList();
  }

  @Override
  public void close() {
    envoy.close();
  }
}
