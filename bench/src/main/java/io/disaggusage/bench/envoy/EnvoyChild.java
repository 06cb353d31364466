package io.disaggusage.bench.envoy;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.testkit.InstalledTools;
import io.disaggusage.extproc.testkit.RealEnvoy;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import io.disaggusage.extproc.testkit.ShippedBootstrap.Topology;
import io.disaggusage.extproc.testkit.ShippedEnvoyConfig;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * A real Envoy on the shipped bootstrap as the e2e suite derives it ({@link ShippedBootstrap#rewrite}: only
 * ports and endpoints change), without the ext_proc filter for {@link Setup#BARE}. Envoy's own defaults
 * otherwise (as many worker threads as cores, info log level). Every setup's shipped stdout access log
 * carries Envoy's ext_proc call latencies at its end ({@link ShippedBootstrap#withExtProcLatencies}; {@code -}
 * without the filter) and goes to a file, flushed every {@link AccessLogTail#FLUSH_INTERVAL}, that
 * {@link FlowLoad} reads after each run: the three setups format and write the same line, as a user's
 * Envoy writes its access log.
 */
final class EnvoyChild implements AutoCloseable {
  /** The release the benchmark runs: the newest one the project pins. */
  static final String RELEASE = "1.40.0";
  private static final String HEALTHY_STAT = "cluster.disagg_usage_extproc.membership_healthy";
  /** The filter's counters of exchanges that went past the processor (fail-open) or broke. */
  private static final List<String> FAILURE_COUNTERS =
      List.of("message_timeouts", "failure_mode_allowed", "streams_failed", "spurious_msgs_received");

  private final Topology topology;
  private final RealEnvoy envoy;
  private final AccessLogTail accessLog;

  private EnvoyChild(Topology topology, RealEnvoy envoy, AccessLogTail accessLog) {
    this.topology = topology;
    this.envoy = envoy;
    this.accessLog = accessLog;
  }

  /** Starts Envoy for {@code setup} and waits until its admin says it is ready. */
  static EnvoyChild start(Setup setup, Topology topology, Path dir) {
    ObjectNode bootstrap =
        ShippedBootstrap.withExtProcLatencies(ShippedBootstrap.rewrite(ShippedEnvoyConfig.bootstrapFile(), topology));
    if (!setup.extProc()) {
      bootstrap = ShippedBootstrap.withoutExtProc(bootstrap);
    }
    Path config = dir.resolve("envoy-" + setup.key + ".yaml");
    try {
      Files.writeString(config, ShippedBootstrap.yaml(bootstrap));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    AccessLogTail accessLog = new AccessLogTail(dir.resolve("envoy-" + setup.key + ".access.log"));
    return new EnvoyChild(topology, RealEnvoy.start("Envoy " + RELEASE + " " + setup.title(),
        InstalledTools.envoy(RELEASE), config, topology.adminPort(), dir.resolve("envoy-" + setup.key + ".log"),
        accessLog.file(), List.of("--file-flush-interval-msec", Long.toString(AccessLogTail.FLUSH_INTERVAL.toMillis()))),
        accessLog);
  }

  /** Its access log, read after each run. */
  AccessLogTail accessLog() {
    return accessLog;
  }

  int contextPort() {
    return topology.contextListener();
  }

  int generationPort() {
    return topology.generationListener();
  }

  /**
   * The ext_proc filter's failure counters so far, summed over both listeners (all 0 without the filter):
   * a message timeout lets the exchange through unprocessed, so a slow processor shows here.
   */
  Map<String, Long> extProcFailures() {
    Map<String, Long> sums = new TreeMap<>();
    String stats = envoy.admin("/stats?filter=ext_proc");
    for (String line : stats == null ? new String[0] : stats.split("\n")) {
      int colon = line.lastIndexOf(": ");
      String counter = colon < 0 ? "" : line.substring(line.lastIndexOf('.', colon) + 1, colon);
      if (FAILURE_COUNTERS.contains(counter)) {
        sums.merge(counter, Long.parseLong(line.substring(colon + 2).trim()), Long::sum);
      }
    }
    return sums;
  }

  /** Waits until Envoy's active health check has passed the ext_proc host (the shipped cluster checks it). */
  void awaitExtProcHealthy(Duration timeout) {
    awaitExtProcHealth(true, timeout);
  }

  /** Waits until Envoy's active health check has marked the ext_proc host healthy, or unhealthy. */
  void awaitExtProcHealth(boolean healthy, Duration timeout) {
    String expected = HEALTHY_STAT + ": " + (healthy ? 1 : 0);
    envoy.await((healthy ? "healthy" : "unhealthy") + " ext_proc host", timeout, () -> {
      String stats = envoy.admin("/stats?filter=" + HEALTHY_STAT);
      return stats != null && stats.lines().anyMatch(line -> line.trim().equals(expected));
    });
  }

  /** Envoy's pid, whose CPU time and memory {@link ProcessMeter} reads. */
  long pid() {
    return envoy.pid();
  }

  @Override
  public void close() {
    envoy.close();
  }
}
