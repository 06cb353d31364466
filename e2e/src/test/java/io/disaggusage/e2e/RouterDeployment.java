package io.disaggusage.e2e;

import io.disaggusage.e2e.PodLocalBootstrap.Pod;
import io.disaggusage.e2e.PodLocalBootstrap.Role;
import io.disaggusage.extproc.testkit.FreePorts;
import io.disaggusage.extproc.testkit.ShippedBootstrap.Topology;
import io.disaggusage.extproc.emulator.workers.WorkerStartException;
import io.disaggusage.extproc.emulator.workers.EngineWorker;
import io.disaggusage.extproc.emulator.workers.WorkerSpec;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * A real P/D router in front of a simulated prefill and decode worker, laid out as docs/deploy.md ships
 * it for that router, or straight at the workers:
 * <ul>
 *   <li>{@link #central}: one Envoy on {@code deploy/envoy/envoy.yaml} in front of both pools (topology 1:
 *       the router's prefill URL is the context_egress listener, its decode URL generation_egress);
 *   <li>{@link #podLocal}: an Envoy beside each worker on {@code deploy/envoy/pod-local} (topology 3: the
 *       prefill "pod" at 127.0.0.2, the decode "pod" at 127.0.0.3, the router given the pods' addresses,
 *       so sglang-router's {@code bootstrap_host} is the prefill pod, where the worker's KV bootstrap
 *       listener is);
 *   <li>{@link #direct}: no Envoy, no service — what the router alone gives a client.
 * </ul>
 * Every leg of the first two crosses Envoy and the shipped jar.
 */
final class RouterDeployment implements AutoCloseable {
  static final String PREFILL_POD = "127.0.0.2";
  static final String DECODE_POD = "127.0.0.3";

  final EngineWorker prefill;
  final EngineWorker decode;
  /** Null for {@link #direct}. */
  final ServiceProcess service;
  /** The Envoy the prefill legs cross (the one Envoy of {@link #central}); null for {@link #direct}. */
  final EnvoyProcess prefillEnvoy;
  /** The Envoy the decode legs cross; null for {@link #direct}. */
  final EnvoyProcess decodeEnvoy;
  /** The cluster name Envoy logs for a decode leg: {@code generation} or {@code decode_local}. */
  final String decodeCluster;
  /** The URLs the router was given for the prefill and the decode worker. */
  final String prefillUrl;
  final String decodeUrl;
  final RouterProcess router;
  private final List<AutoCloseable> children;

  private RouterDeployment(Builder b) {
    this.prefill = b.prefill;
    this.decode = b.decode;
    this.service = b.service;
    this.prefillEnvoy = b.prefillEnvoy;
    this.decodeEnvoy = b.decodeEnvoy;
    this.decodeCluster = b.decodeCluster;
    this.prefillUrl = b.prefillUrl;
    this.decodeUrl = b.decodeUrl;
    this.router = b.router;
    this.children = b.started;
  }

  /** What has started so far, closed again (last first) when a later step fails. */
  private static final class Builder {
    final List<AutoCloseable> started = new ArrayList<>();
    EngineWorker prefill;
    EngineWorker decode;
    ServiceProcess service;
    EnvoyProcess prefillEnvoy;
    EnvoyProcess decodeEnvoy;
    String decodeCluster;
    String prefillUrl;
    String decodeUrl;
    RouterProcess router;

    <T extends AutoCloseable> T started(T child) {
      started.add(0, child);
      return child;
    }

    RouterDeployment router(String name, RouterKind kind) {
      router = started(RouterProcess.start(name + "-" + kind.label(), kind, prefillUrl,
          prefill.bootstrapPort().orElse(0), decodeUrl));
      return new RouterDeployment(this);
    }
  }

  /**
   * Topology 1: one Envoy {@code release} on the shipped envoy.yaml in front of both workers; the service
   * with {@code serviceArgs} besides the shipped settings.
   */
  static RouterDeployment central(
      String name, String release, RouterKind kind, WorkerSpec prefill, WorkerSpec decode, String... serviceArgs) {
    Builder b = new Builder();
    try {
      b.prefill = b.started(worker(prefill));
      b.decode = b.started(worker(decode));
      b.service = b.started(ServiceProcess.started(name + "-service", serviceArgs));
      Topology topology = new Topology(FreePorts.next(), FreePorts.next(), FreePorts.next(),
          List.of(b.prefill.port()), List.of(b.decode.port()), List.of(b.service.grpcPort()));
      b.prefillEnvoy = b.started(EnvoyProcess.start(name + "-envoy-" + release, release, topology));
      b.decodeEnvoy = b.prefillEnvoy;
      b.prefillEnvoy.awaitExtProcHealthy(Duration.ofSeconds(30));
      b.decodeCluster = "generation";
      b.prefillUrl = b.prefillEnvoy.contextUrl("");
      b.decodeUrl = b.prefillEnvoy.generationUrl("");
      return b.router(name, kind);
    } catch (RuntimeException | AssertionError e) {
      closeAll(b.started);
      throw e;
    }
  }

  /**
   * Topology 3: Envoy {@code release} beside each worker on the shipped pod-local bootstraps; the service
   * with {@code serviceArgs} besides the pod-local classification.
   */
  static RouterDeployment podLocal(
      String name, String release, RouterKind kind, WorkerSpec prefill, WorkerSpec decode, String... serviceArgs) {
    if (!PREFILL_POD.equals(prefill.host()) || !DECODE_POD.equals(decode.host())) {
      throw new IllegalArgumentException("pod-local workers listen on the pods' addresses " + PREFILL_POD + " and " + DECODE_POD);
    }
    Builder b = new Builder();
    try {
      b.prefill = b.started(worker(prefill));
      b.decode = b.started(worker(decode));
      b.service = b.started(ServiceProcess.started(name + "-service", PodLocalBootstrap.serviceArgs(serviceArgs)));
      Pod prefillPod = Pod.of(Role.PREFILL, PREFILL_POD, b.prefill.port(), List.of(b.service.grpcPort()));
      Pod decodePod = Pod.of(Role.DECODE, DECODE_POD, b.decode.port(), List.of(b.service.grpcPort()));
      b.prefillEnvoy = b.started(prefillPod.start(name + "-prefill-envoy-" + release, release));
      b.decodeEnvoy = b.started(decodePod.start(name + "-decode-envoy-" + release, release));
      b.prefillEnvoy.awaitExtProcHealthy(Duration.ofSeconds(30));
      b.decodeEnvoy.awaitExtProcHealthy(Duration.ofSeconds(30));
      b.decodeCluster = Role.DECODE.cluster;
      b.prefillUrl = prefillPod.url("");
      b.decodeUrl = decodePod.url("");
      return b.router(name, kind);
    } catch (RuntimeException | AssertionError e) {
      closeAll(b.started);
      throw e;
    }
  }

  /** The same router and workers with nothing in between: what the router alone gives a client. */
  static RouterDeployment direct(String name, RouterKind kind, WorkerSpec prefill, WorkerSpec decode) {
    Builder b = new Builder();
    try {
      b.prefill = b.started(worker(prefill));
      b.decode = b.started(worker(decode));
      b.prefillUrl = base(b.prefill);
      b.decodeUrl = base(b.decode);
      return b.router(name, kind);
    } catch (RuntimeException | AssertionError e) {
      closeAll(b.started);
      throw e;
    }
  }

  static EngineWorker worker(WorkerSpec spec) {
    try {
      return EngineWorker.start(spec);
    } catch (WorkerStartException e) {
      throw new IllegalStateException(e);
    }
  }

  static void closeAll(List<AutoCloseable> children) {
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

  /** A path on the router. */
  String url(String path) {
    return router.url(path);
  }

  @Override
  public void close() {
    closeAll(children);
  }
}
