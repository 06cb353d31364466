package io.disaggusage.e2e;

import io.disaggusage.e2e.ShippedBootstrap.Topology;
import io.disaggusage.extproc.runtime.StartupException;
import io.disaggusage.extproc.simulation.workers.EngineWorker;
import io.disaggusage.extproc.simulation.workers.WorkerSpec;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * A real P/D router in front of a simulated prefill and decode worker, either through real Envoy on the
 * shipped bootstrap and the shipped jar (each worker URL is an Envoy listener: context_egress → the
 * prefill, generation_egress → the decode), or straight at the workers (no Envoy, no service).
 */
final class RouterDeployment implements AutoCloseable {
  final EngineWorker prefill;
  final EngineWorker decode;
  /** Null when the router calls the workers directly. */
  final ServiceProcess service;
  /** Null when the router calls the workers directly. */
  final EnvoyProcess envoy;
  final RouterProcess router;

  private RouterDeployment(
      EngineWorker prefill, EngineWorker decode, ServiceProcess service, EnvoyProcess envoy, RouterProcess router) {
    this.prefill = prefill;
    this.decode = decode;
    this.service = service;
    this.envoy = envoy;
    this.router = router;
  }

  /** Workers, the service (ready), Envoy {@code release} (ext_proc healthy), then the router through it. */
  static RouterDeployment throughEnvoy(String name, String release, RouterKind kind, WorkerSpec prefill, WorkerSpec decode) {
    List<AutoCloseable> started = new ArrayList<>();
    try {
      EngineWorker prefillWorker = started(started, worker(prefill));
      EngineWorker decodeWorker = started(started, worker(decode));
      ServiceProcess service = started(started, ServiceProcess.started(name + "-service"));
      Topology topology = new Topology(FreePorts.next(), FreePorts.next(), FreePorts.next(),
          List.of(prefillWorker.port()), List.of(decodeWorker.port()), List.of(service.grpcPort()));
      EnvoyProcess envoy = started(started, EnvoyProcess.start(name + "-envoy-" + release, release, topology));
      envoy.awaitExtProcHealthy(Duration.ofSeconds(30));
      RouterProcess router = RouterProcess.start(name + "-" + kind.label(), kind, envoy.contextUrl(""),
          prefillWorker.bootstrapPort().orElse(0), envoy.generationUrl(""));
      return new RouterDeployment(prefillWorker, decodeWorker, service, envoy, router);
    } catch (RuntimeException | AssertionError e) {
      closeAll(started);
      throw e;
    }
  }

  /** The same router and workers with nothing in between: what the router alone gives a client. */
  static RouterDeployment direct(String name, RouterKind kind, WorkerSpec prefill, WorkerSpec decode) {
    List<AutoCloseable> started = new ArrayList<>();
    try {
      EngineWorker prefillWorker = started(started, worker(prefill));
      EngineWorker decodeWorker = started(started, worker(decode));
      RouterProcess router = RouterProcess.start(name + "-" + kind.label(), kind, base(prefillWorker),
          prefillWorker.bootstrapPort().orElse(0), base(decodeWorker));
      return new RouterDeployment(prefillWorker, decodeWorker, null, null, router);
    } catch (RuntimeException | AssertionError e) {
      closeAll(started);
      throw e;
    }
  }

  private static EngineWorker worker(WorkerSpec spec) {
    try {
      return EngineWorker.start(spec);
    } catch (StartupException e) {
      throw new IllegalStateException(e);
    }
  }

  private static <T extends AutoCloseable> T started(List<AutoCloseable> started, T child) {
    started.add(0, child);
    return child;
  }

  private static void closeAll(List<AutoCloseable> children) {
    for (AutoCloseable child : children) {
      try {
        child.close();
      } catch (Exception e) {
        // the first failure is the one the test reports
      }
    }
  }

  /** A worker's URL without the trailing slash the routers would double. */
  private static String base(EngineWorker worker) {
    String url = worker.url().toString();
    return url.endsWith("/") ? url.substring(0, url.length() - 1) : url;
  }

  String url(String path) {
    return router.url(path);
  }

  @Override
  public void close() {
    List<AutoCloseable> children = new ArrayList<>();
    children.add(router);
    if (envoy != null) {
      children.add(envoy);
    }
    if (service != null) {
      children.add(service);
    }
    children.add(decode);
    children.add(prefill);
    closeAll(children);
  }
}
