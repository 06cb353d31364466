package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.AccessLogLine;
import io.disaggusage.extproc.testkit.FreePorts;
import io.disaggusage.extproc.testkit.ShippedBootstrap.Topology;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The shipped jar and one real Envoy on the shipped envoy.yaml in front of the real vLLM pair
 * ({@link RealVllmPair}, shared by the whole run): Envoy's context cluster is the prefill server, its
 * generation cluster the decode server, each reached through a {@link RecordingHop} that keeps the
 * engine's own answers. What an orchestrator (a P/D proxy, a router) calls are Envoy's listeners.
 */
final class RealVllmStack implements AutoCloseable {
  final RealVllmPair pair;
  final RecordingHop prefill;
  final RecordingHop decode;
  final ServiceProcess service;
  final EnvoyProcess envoy;
  private final List<AutoCloseable> started;

  private RealVllmStack(RealVllmPair pair, RecordingHop prefill, RecordingHop decode, ServiceProcess service,
      EnvoyProcess envoy, List<AutoCloseable> started) {
    this.pair = pair;
    this.prefill = prefill;
    this.decode = decode;
    this.service = service;
    this.envoy = envoy;
    this.started = started;
  }

  /** Starts the service and Envoy {@code release} (the pair on first use) and waits until Envoy's health checks pass. */
  static RealVllmStack start(String name, String release) {
    RealVllmPair pair = RealVllmPair.get();
    List<AutoCloseable> started = new ArrayList<>();
    try {
      RecordingHop prefill = first(started, new RecordingHop(pair.prefill.url("")));
      RecordingHop decode = first(started, new RecordingHop(pair.decode.url("")));
      ServiceProcess service = first(started, ServiceProcess.started(name + "-service"));
      Topology topology = new Topology(FreePorts.next(), FreePorts.next(), FreePorts.next(),
          List.of(prefill.port()), List.of(decode.port()), List.of(service.grpcPort()));
      EnvoyProcess envoy = first(started, EnvoyProcess.start(name + "-envoy-" + release, release, topology));
      envoy.awaitExtProcHealthy(Duration.ofSeconds(30));
      return new RealVllmStack(pair, prefill, decode, service, envoy, started);
    } catch (RuntimeException | AssertionError e) {
      RouterDeployment.closeAll(started);
      throw e;
    }
  }

  private static <T extends AutoCloseable> T first(List<AutoCloseable> started, T child) {
    started.add(0, child);
    return child;
  }

  /** The Envoy access-log lines of generation exchanges on {@code path}, in the order they ended. */
  List<AccessLogLine> generationLines(String path) {
    return envoy.accessLog("generation").stream().filter(l -> l.path().startsWith(path)).toList();
  }

  @Override
  public void close() {
    RouterDeployment.closeAll(started);
  }
}
