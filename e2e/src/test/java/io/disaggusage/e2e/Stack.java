package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.FreePorts;
import io.disaggusage.extproc.testkit.InstalledTools;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import io.disaggusage.extproc.testkit.ShippedBootstrap.Topology;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * One deployment as a user runs it: a context worker and a generation worker, {@code replicas} service
 * processes, and one real Envoy release on the shipped bootstrap in front of them all.
 */
final class Stack implements AutoCloseable {
  final Worker context;
  final Worker generation;
  final List<ServiceProcess> services;
  final EnvoyProcess envoy;

  private Stack(Worker context, Worker generation, List<ServiceProcess> services, EnvoyProcess envoy) {
    this.context = context;
    this.generation = generation;
    this.services = services;
    this.envoy = envoy;
  }

  /** Starts services (ready), then Envoy, then waits until Envoy's health checks pass them. */
  static Stack start(String name, String release, int replicas, String... serviceSettings) {
    return start(name, release, replicas, InstalledTools.serviceCommand(), serviceSettings);
  }

  /** {@link #start(String, String, int, String...)} with services started by {@code launcher}. */
  static Stack start(String name, String release, int replicas, List<String> launcher, String... serviceSettings) {
    return start(name, release, replicas, launcher,
        topology -> ShippedBootstrap.rewrite(Tools.shippedBootstrap(), topology), serviceSettings);
  }

  /**
   * {@link #start(String, String, int, List, String...)} with Envoy running the bootstrap {@code bootstrap}
   * makes for the test's ports (a shipped variant of deploy/envoy/envoy.yaml, say).
   */
  static Stack start(String name, String release, int replicas, List<String> launcher,
      java.util.function.Function<Topology, com.fasterxml.jackson.databind.node.ObjectNode> bootstrap,
      String... serviceSettings) {
    Worker context = new Worker(name + "-context");
    Worker generation = new Worker(name + "-generation");
    List<ServiceProcess> services = new ArrayList<>();
    EnvoyProcess envoy = null;
    try {
      for (int i = 0; i < replicas; i++) {
        ServiceProcess service = ServiceProcess.create(name + "-service-" + i, launcher, serviceSettings);
        services.add(service);
        service.start();
        service.awaitReady(Duration.ofSeconds(30));
      }
      Topology topology = topology(context, generation, services);
      envoy = EnvoyProcess.start(name + "-envoy-" + release, release, bootstrap.apply(topology), topology);
      envoy.awaitExtProcHealthy(Duration.ofSeconds(30));
      return new Stack(context, generation, services, envoy);
    } catch (RuntimeException | AssertionError e) {
      new Stack(context, generation, services, envoy).close(); // what did start is stopped again
      throw e;
    }
  }

  /**
   * Starts Envoy while no service runs yet (the services are created, not started): a test starts them
   * later with {@link ServiceProcess#start()}.
   */
  static Stack startEnvoyFirst(String name, String release, int replicas, String... serviceSettings) {
    Worker context = new Worker(name + "-context");
    Worker generation = new Worker(name + "-generation");
    List<ServiceProcess> services = new ArrayList<>();
    for (int i = 0; i < replicas; i++) {
      services.add(ServiceProcess.create(name + "-service-" + i, serviceSettings));
    }
    EnvoyProcess envoy = EnvoyProcess.start(name + "-envoy-" + release, release, topology(context, generation, services));
    return new Stack(context, generation, services, envoy);
  }

  /** A view of workers and an Envoy a test manages itself (services not included). */
  static Stack around(Worker context, Worker generation, EnvoyProcess envoy) {
    return new Stack(context, generation, List.of(), envoy);
  }

  static Topology topology(Worker context, Worker generation, List<ServiceProcess> services) {
    return new Topology(
        FreePorts.next(), FreePorts.next(), FreePorts.next(), List.of(context.port()), List.of(generation.port()),
        services.stream().map(ServiceProcess::grpcPort).toList());
  }

  ServiceProcess service() {
    return services.get(0);
  }

  @Override
  public void close() {
    if (envoy != null) {
      envoy.close();
    }
    services.forEach(ServiceProcess::close);
    context.close();
    generation.close();
  }
}
