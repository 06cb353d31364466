package io.disaggusage.e2e;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The service as a user runs it: {@code java -jar server/target/disagg-usage-extproc.jar} with the
 * classification settings the shipped Envoy bootstrap's header asks for, on its own ports. It can be
 * killed, frozen, thawed and started again on the same ports.
 */
final class ServiceProcess extends ChildProcess {
  /** The settings {@code deploy/envoy/envoy.yaml} names in its header comment. */
  static final List<String> SHIPPED_ENVOY_SETTINGS =
      List.of("--set", "classification.context_clusters=context", "--set", "classification.generation_clusters=generation");

  private final String name;
  private final int grpcPort;
  private final int adminPort;
  private final List<String> settings;

  private ServiceProcess(String name, int grpcPort, int adminPort, List<String> settings) {
    super(Duration.ofSeconds(10));
    this.name = name;
    this.grpcPort = grpcPort;
    this.adminPort = adminPort;
    this.settings = List.copyOf(settings);
  }

  /** A service on fresh ports with the shipped settings plus {@code extra}; not started yet. */
  static ServiceProcess create(String name, String... extra) {
    try {
      java.nio.file.Files.deleteIfExists(Tools.logs().resolve(name + ".log")); // restarts append; runs do not
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    List<String> settings = new ArrayList<>(SHIPPED_ENVOY_SETTINGS);
    settings.addAll(List.of(extra));
    return new ServiceProcess(name, FreePorts.next(), FreePorts.next(), settings);
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
    if (process != null && process.isAlive()) {
      throw new IllegalStateException(name + " is running");
    }
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.add("-jar");
    command.add(Tools.serviceJar().toString());
    command.addAll(List.of("--grpc-port", Integer.toString(grpcPort), "--admin-port", Integer.toString(adminPort)));
    command.addAll(settings);
    Path log = Tools.logs().resolve(name + ".log");
    process = Processes.start(command, log, log);
  }

  void awaitReady(Duration timeout) {
    Processes.await(name + " /readyz", timeout, () -> {
      if (!process.isAlive()) {
        throw new AssertionError(name + " exited with " + process.exitValue() + "; see " + Tools.logs().resolve(name + ".log"));
      }
      return Http.ok(adminUrl("/readyz"));
    });
  }

  int grpcPort() {
    return grpcPort;
  }

  String adminUrl(String path) {
    return "http://127.0.0.1:" + adminPort + path;
  }

  /** {@code disagg_usage_exchanges_total} for one phase and outcome, as /metrics shows it now. */
  long exchanges(String phase, String outcome) {
    return ServiceMetrics.exchanges(this, phase).getOrDefault(outcome, 0L);
  }

}
