package io.disaggusage.bench.envoy;

import io.disaggusage.extproc.testkit.FreePorts;
import io.disaggusage.extproc.testkit.InstalledTools;
import io.disaggusage.extproc.testkit.ShippedBootstrap.Topology;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * Everything every setup needs, started once and kept up for the whole run so the setups can take turns:
 * the two workers, the null processor and the service as child JVMs, and one Envoy per setup. Idle, the
 * Envoys and JVMs not being measured cost only their health checks.
 */
final class BenchStack implements AutoCloseable {
  private final List<AutoCloseable> owned = new ArrayList<>();
  private final Map<Setup, EnvoyChild> envoys = new EnumMap<>(Setup.class);
  private final Map<Setup, ExtProcChild> extProcs = new EnumMap<>(Setup.class);
  /** Resident memory of each ext_proc process once it was ready and healthy in Envoy, before any flow. */
  private final Map<Setup, Long> idleRss = new EnumMap<>(Setup.class);
  private final EventLoopGroup workerLoops;
  private StreamingWorker generation;

  private BenchStack() {
    // one thread for both workers: their work per flow is a few writes (docs/performance.md has its share)
    workerLoops = new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("bench-worker", true), NioIoHandler.newFactory());
  }

  /**
   * Starts everything; fails before starting anything when Envoy or the shipped jar is missing, with
   * the command that installs or builds it.
   */
  static BenchStack start(FlowBodies bodies, List<String> serviceJvmOptions, Path dir, Consumer<String> log)
      throws InterruptedException {
    InstalledTools.envoy(EnvoyChild.RELEASE);
    InstalledTools.serviceJar();
    BenchStack stack = new BenchStack();
    try {
      StreamingWorker context = stack.own(new StreamingWorker(stack.workerLoops, StreamingWorker.Role.CONTEXT, bodies));
      stack.generation = stack.own(new StreamingWorker(stack.workerLoops, StreamingWorker.Role.GENERATION, bodies));
      log.accept("starting the null processor and the service (java -jar " + InstalledTools.serviceJar().getFileName() + ")");
      stack.extProcs.put(Setup.NULL, stack.own(ExtProcChild.nullProcessor(dir)));
      stack.extProcs.put(Setup.SERVICE, stack.own(ExtProcChild.service(dir, serviceJvmOptions)));
      for (Setup setup : Setup.values()) {
        // (a) keeps the shipped service cluster (unused, health-checked): point it at the null processor
        ExtProcChild extProc = stack.extProcs.getOrDefault(setup, stack.extProcs.get(Setup.NULL));
        Topology topology = new Topology(FreePorts.next(), FreePorts.next(), FreePorts.next(),
            List.of(context.port()), List.of(stack.generation.port()), List.of(extProc.grpcPort));
        log.accept("starting Envoy " + EnvoyChild.RELEASE + " for " + setup.title());
        stack.envoys.put(setup, stack.own(EnvoyChild.start(setup, topology, dir)));
      }
      for (Setup setup : stack.extProcs.keySet()) {
        stack.envoys.get(setup).awaitExtProcHealthy(Duration.ofSeconds(30));
        stack.idleRss.put(setup, ProcessMeter.rssBytes(stack.extProcs.get(setup).pid()));
      }
      return stack;
    } catch (RuntimeException | InterruptedException e) {
      stack.close();
      throw e;
    }
  }

  EnvoyChild envoy(Setup setup) {
    return envoys.get(setup);
  }

  /** The setup's ext_proc process; null for {@link Setup#BARE}. */
  ExtProcChild extProc(Setup setup) {
    return extProcs.get(setup);
  }

  long idleRss(Setup setup) {
    return idleRss.getOrDefault(setup, 0L);
  }

  /**
   * Stops {@code setup}'s ext_proc process, waits until its Envoy's health check has noticed, starts a
   * fresh one on the same port and waits until the health check has passed it: the rest stays warm.
   */
  void restart(Setup setup) {
    ExtProcChild old = extProcs.get(setup);
    old.close();
    owned.remove(old);
    envoys.get(setup).awaitExtProcHealth(false, Duration.ofSeconds(30));
    extProcs.put(setup, own(old.startAgain()));
    envoys.get(setup).awaitExtProcHealthy(Duration.ofSeconds(30));
  }

  StreamingWorker generationWorker() {
    return generation;
  }

  private <T extends AutoCloseable> T own(T resource) {
    owned.add(resource);
    return resource;
  }

  @Override
  public void close() {
    for (int i = owned.size() - 1; i >= 0; i--) {
      try {
        owned.get(i).close();
      } catch (Exception e) {
        // closing the rest matters more
      }
    }
    workerLoops.shutdownGracefully(0, 1, TimeUnit.SECONDS);
  }
}
