package io.disaggusage.e2e;

import io.disaggusage.e2e.ShippedBootstrap.Topology;
import io.disaggusage.extproc.runtime.StartupException;
import io.disaggusage.extproc.simulation.engines.UsageVariant;
import io.disaggusage.extproc.simulation.workers.EngineKind;
import io.disaggusage.extproc.simulation.workers.EngineWorker;
import io.disaggusage.extproc.simulation.workers.WorkerRole;
import io.disaggusage.extproc.simulation.workers.WorkerSpec;
import java.time.Duration;
import java.util.List;

/**
 * The shipped jar and one real Envoy release on the shipped bootstrap in front of the shared simulated
 * TensorRT-LLM workers (the ones behind the {@code workers} command): a context worker with a real
 * prefix cache and a generation worker reporting {@code variant}'s usage.
 */
final class TrtLlmStack implements AutoCloseable {
  final EngineWorker context;
  final EngineWorker generation;
  final ServiceProcess service;
  final EnvoyProcess envoy;

  private TrtLlmStack(EngineWorker context, EngineWorker generation, ServiceProcess service, EnvoyProcess envoy) {
    this.context = context;
    this.generation = generation;
    this.service = service;
    this.envoy = envoy;
  }

  /**
   * Starts the workers, the service (ready), then Envoy, and waits until Envoy's health check passes the
   * service; whatever started is stopped again when a later part fails.
   *
   * @param prefillDelay how late the context worker answers, so a generation-first flow's generation
   *     response is at Envoy before the context usage it must wait for
   */
  static TrtLlmStack start(String name, String release, UsageVariant variant, Duration prefillDelay) {
    EngineWorker context = null;
    EngineWorker generation = null;
    ServiceProcess service = null;
    EnvoyProcess envoy = null;
    try {
      context = EngineWorker.start(
          WorkerSpec.of(EngineKind.TRTLLM, WorkerRole.PREFILL, ShippedBootstrap.LOOPBACK, 0).withVariant(variant).withPrefillDelay(prefillDelay));
      generation = EngineWorker.start(WorkerSpec.of(EngineKind.TRTLLM, WorkerRole.DECODE, ShippedBootstrap.LOOPBACK, 0).withVariant(variant));
      service = ServiceProcess.started(name + "-service");
      Topology topology = new Topology(
          FreePorts.next(), FreePorts.next(), FreePorts.next(), List.of(context.port()), List.of(generation.port()), List.of(service.grpcPort()));
      envoy = EnvoyProcess.start(name + "-envoy-" + release, release, topology);
      envoy.awaitExtProcHealthy(Duration.ofSeconds(30));
      return new TrtLlmStack(context, generation, service, envoy);
    } catch (StartupException e) {
      new TrtLlmStack(context, generation, service, envoy).close();
      throw new IllegalStateException(e);
    } catch (RuntimeException | AssertionError e) {
      new TrtLlmStack(context, generation, service, envoy).close();
      throw e;
    }
  }

  /** The access-log lines of the generation listener so far. */
  List<AccessLogLine> generationLines() {
    return envoy.accessLog().stream().filter(l -> l.cluster().equals("generation")).toList();
  }

  @Override
  public void close() {
    if (envoy != null) {
      envoy.close();
    }
    if (service != null) {
      service.close();
    }
    if (context != null) {
      context.close();
    }
    if (generation != null) {
      generation.close();
    }
  }
}
