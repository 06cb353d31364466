package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.logtext.LogText;
import io.disaggusage.extproc.testkit.ChildProcess;
import io.disaggusage.extproc.testkit.FreePorts;
import io.disaggusage.extproc.testkit.InstalledTools;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The service as a user runs it: the README's command ({@link InstalledTools#serviceCommand()}) with the classification settings the shipped Envoy
 * bootstrap's header asks for ({@link ShippedBootstrap#SERVICE_SETTINGS}), on its own ports. It can be
 * killed, frozen, thawed and started again on the same ports.
 */
final class ServiceProcess extends ChildProcess {
  /**
   * The argument that makes the service write one DEBUG summary line per exchange (phase, outcome,
   * correlation key, counts; never body bytes), read back by {@link #keys}.
   */
  static final String[] EXCHANGE_LINES = {"--log-level", "debug"};
  private static final java.util.regex.Pattern SUMMARY =
      java.util.regex.Pattern.compile("exchange phase=(\\S+) outcome=(\\S+) key=(\\S+) model=(\\S+) ");
  /** The model of the flows the service runs through itself at start-up (warm-up), which {@link #keys} skips. */
  private static final String WARMUP_MODEL = "warmup";

  private static final Pattern VARIABLE = Pattern.compile("(DISAGG_USAGE_[A-Z0-9_]+|JAVA_TOOL_OPTIONS|JDK_JAVA_OPTIONS)=(.*)");

  private final List<String> launcher;
  private final int grpcPort;
  private final int adminPort;
  private final List<String> settings;
  private final Map<String, String> environment;

  private ServiceProcess(String name, List<String> launcher, int grpcPort, int adminPort, List<String> settings,
      Map<String, String> environment) {
    super(name, Tools.logs().resolve(name + ".log"), Duration.ofSeconds(10));
    this.launcher = List.copyOf(launcher);
    this.grpcPort = grpcPort;
    this.adminPort = adminPort;
    this.settings = List.copyOf(settings);
    this.environment = Map.copyOf(environment);
  }

  /**
   * A service on fresh ports with the shipped settings plus {@code extra}; not started yet. An
   * {@code extra} of the form {@code DISAGG_USAGE_...=value}, {@code JAVA_TOOL_OPTIONS=...} or
   * {@code JDK_JAVA_OPTIONS=...} is set as an environment variable, as a container would set it; the
   * others are command-line arguments.
   */
  static ServiceProcess create(String name, String... extra) {
    return create(name, InstalledTools.serviceCommand(), extra);
  }

  /** {@link #create(String, String...)} started by {@code launcher} instead of the README's command. */
  static ServiceProcess create(String name, List<String> launcher, String... extra) {
    return create(name, launcher, FreePorts.next(), extra);
  }

  /**
   * {@link #create(String, String...)} listening for gRPC on {@code grpcPort}: where a shipped manifest names the
   * port (Istio's sidecar cluster points at 127.0.0.1:9002).
   */
  static ServiceProcess createOnPort(String name, int grpcPort, String... extra) {
    return create(name, InstalledTools.serviceCommand(), grpcPort, extra);
  }

  private static ServiceProcess create(String name, List<String> launcher, int grpcPort, String... extra) {
    try {
      java.nio.file.Files.deleteIfExists(Tools.logs().resolve(name + ".log")); // restarts append; runs do not
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    List<String> settings = new ArrayList<>(ShippedBootstrap.SERVICE_SETTINGS);
    Map<String, String> environment = new TreeMap<>();
    for (String setting : extra) {
      Matcher variable = VARIABLE.matcher(setting);
      if (variable.matches()) {
        environment.put(variable.group(1), variable.group(2));
      } else {
        settings.add(setting);
      }
    }
    return new ServiceProcess(name, launcher, grpcPort, FreePorts.next(), settings, environment);
  }

  /** Creates and starts one, waiting until {@code /readyz} answers 200. */
  static ServiceProcess started(String name, String... extra) {
    ServiceProcess service = create(name, extra);
    service.start();
    service.awaitReady(Duration.ofSeconds(30));
    return service;
  }

  /** Starts the process (again, after a kill) without waiting for it. */
  void start() {
    List<String> command = new ArrayList<>(launcher);
    command.addAll(List.of("--grpc-port", Integer.toString(grpcPort), "--admin-port", Integer.toString(adminPort)));
    command.addAll(settings);
    launch(command, environment);
  }

  void awaitReady(Duration timeout) {
    await("/readyz", timeout, () -> Http.ok(adminUrl("/readyz")));
  }

  int grpcPort() {
    return grpcPort;
  }

  String adminUrl(String path) {
    return "http://127.0.0.1:" + adminPort + path;
  }

  /**
   * The correlation key of each {@code phase} exchange in the service's summary lines (a service started
   * with {@link #EXCHANGE_LINES}), in the order logged, its start-up warm-up aside: the source prefix
   * ({@code xrid}, {@code sgl}, {@code trt}, {@code hdr}), a colon, and the value cut to 64 characters
   * ({@code ...} when cut); {@code -} for an exchange without a key.
   */
  List<String> keys(String phase) {
    List<String> keys = new ArrayList<>();
    try (java.util.stream.Stream<String> lines = java.nio.file.Files.lines(log())) {
      lines.map(SUMMARY::matcher).filter(java.util.regex.Matcher::find)
          .filter(m -> m.group(1).equals(phase) && !m.group(4).equals(WARMUP_MODEL)).forEach(m -> keys.add(m.group(3)));
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    return keys;
  }

  /**
   * The service's summary lines name, in each phase, exactly the keys {@code source:value} for
   * {@code values} (one per exchange, any order; each value cut as the service cuts it).
   */
  void assertKeys(String source, List<String> values) {
    List<String> expected = values.stream().map(v -> source + ":" + LogText.bounded(v)).toList();
    for (String phase : List.of("context", "generation")) {
      Processes.await(expected.size() + " " + phase + " summary lines", Duration.ofSeconds(5),
          () -> keys(phase).size() >= expected.size());
      assertThat(keys(phase)).as("the service's " + phase + " keys").containsExactlyInAnyOrderElementsOf(expected);
    }
  }

  /** {@code disagg_usage_exchanges_total} for one phase and outcome, as /metrics shows it now. */
  long exchanges(String phase, String outcome) {
    return ServiceMetrics.exchanges(this, phase).getOrDefault(outcome, 0L);
  }

}
