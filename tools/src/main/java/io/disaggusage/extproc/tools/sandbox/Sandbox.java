package io.disaggusage.extproc.tools.sandbox;

import com.sun.net.httpserver.HttpServer;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.config.ConfigException;
import io.disaggusage.extproc.config.ConfigLoader;
import io.disaggusage.extproc.config.ConfigLoader.Setting;
import io.disaggusage.extproc.runtime.ServerRuntime;
import io.disaggusage.extproc.runtime.StartupException;
import io.disaggusage.extproc.emulator.engines.PrefixCache;
import io.disaggusage.extproc.emulator.engines.TrtLlmEngine;
import io.disaggusage.extproc.emulator.engines.VllmEngine;
import io.disaggusage.extproc.tools.sandbox.SandboxBootstrap.ClusterSpec;
import io.disaggusage.extproc.emulator.workers.EngineWorker;
import io.disaggusage.extproc.emulator.workers.WorkerStartException;
import io.disaggusage.extproc.emulator.workers.WorkerRole;
import io.disaggusage.extproc.emulator.workers.WorkerSpec;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.URI;
import java.net.http.HttpClient;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Collectors;

/**
 * Everything the {@code sandbox} command runs: the service (the real server: ext_proc gRPC and admin
 * HTTP, on loopback), simulated TensorRT-LLM and vLLM context and generation workers ({@link EngineWorker}), a real
 * Envoy child process on a bootstrap derived from the shipped one, and per family two orchestrators, one
 * calling the workers through Envoy listeners with the ext_proc filter and one through copies without
 * it. Started in that order (each needs the ports of the ones before), stopped in reverse.
 */
public final class Sandbox implements AutoCloseable {
  private static final Duration ENVOY_READY_TIMEOUT = Duration.ofSeconds(30);

  /**
   * A decode worker emits its tokens over time: a pause before each event makes a stream visibly
   * stream with {@code curl -N}, and keeps its events in separate chunks on the way through Envoy.
   */
  private static final Duration EVENT_PAUSE = Duration.ofMillis(15);

  private static final String LOOPBACK = "127.0.0.1";

  private final List<Family> families;
  private final Map<Family, Map<Passage, URI>> orchestrators = new HashMap<>();
  /** What to stop, the last started first. */
  private final Deque<AutoCloseable> started = new ArrayDeque<>();
  private final AtomicBoolean closing = new AtomicBoolean();
  private final CountDownLatch closed = new CountDownLatch(1);
  private final HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private final ExecutorService handlers =
      Executors.newCachedThreadPool(
          runnable -> {
            Thread thread = new Thread(runnable, "disagg-usage-sandbox-http");
            thread.setDaemon(true);
            return thread;
          });
  private ServerRuntime service;
  private EnvoyProcess envoy;
  private EnvoyBinary envoyBinary;
  private Path workDir;
  private Optional<Duration> messageTimeout = Optional.empty();
  private Duration readyAfter = Duration.ZERO;
  private List<String> startupProblems = List.of();

  private Sandbox() {
    // the families' engines only build the orchestrators' calls: the workers hold the prefix caches
    families =
        List.of(
            new Family("trtllm", 0, new TrtLlmEngine(new PrefixCache(PrefixCache.DEFAULT_BLOCK_TOKENS, 1))),
            new Family("vllm", 1, new VllmEngine(new PrefixCache(PrefixCache.DEFAULT_BLOCK_TOKENS, 1))));
    started.push(handlers::shutdownNow);
  }

  /**
   * Starts everything and sends the start-up request of each family both ways (it warms the path and
   * the context workers' caches, and checks that the service corrects through Envoy).
   *
   * @param portBase see {@link SandboxPorts}; 0 for any free ports
   * @param messageTimeout the ext_proc filter's {@code message_timeout}; empty for the shipped one
   * @throws StartupException when a port is taken or Envoy does not come up; what had started is stopped
   */
  public static Sandbox start(EnvoyBinary envoy, int portBase, Optional<Duration> messageTimeout)
      throws StartupException, IOException, InterruptedException {
    SandboxPorts ports = new SandboxPorts(portBase);
    Sandbox sandbox = new Sandbox();
    try {
      sandbox.startAll(envoy, ports, messageTimeout);
    } catch (StartupException | IOException | InterruptedException | RuntimeException e) {
      sandbox.close();
      throw e;
    }
    return sandbox;
  }

  /**
   * Refuses a port base the sandbox cannot use.
   *
   * @throws IllegalArgumentException saying which bases it can
   */
  public static void checkPortBase(int portBase) {
    new SandboxPorts(portBase);
  }

  private void startAll(EnvoyBinary binary, SandboxPorts ports, Optional<Duration> messageTimeout)
      throws StartupException, IOException, InterruptedException {
    envoyBinary = binary;
    this.messageTimeout = messageTimeout;
    service = ServerRuntime.start(serviceConfig(ports));
    started.push(service);
    List<ClusterSpec> workers = new ArrayList<>();
    for (Family family : families) {
      for (Leg leg : Leg.values()) {
        EngineWorker worker = startWorker(family, leg, ports.worker(family, leg));
        workers.add(new ClusterSpec(family.cluster(leg), leg, worker.port()));
      }
    }
    workDir = Files.createTempDirectory("disagg-usage-sandbox-");
    String bootstrap =
        SandboxBootstrap.render(
            SandboxBootstrap.derive(
                SandboxBootstrap.shippedYaml(),
                ports.envoyAdmin(),
                service.grpcPort(),
                SandboxBootstrap.listeners(families, ports),
                workers,
                messageTimeout));
    envoy = EnvoyProcess.start(binary, bootstrap, workDir, ENVOY_READY_TIMEOUT);
    started.push(envoy);
    for (Family family : families) {
      for (Passage passage : Passage.values()) {
        Orchestrator orchestrator =
            new Orchestrator(
                family.engine(),
                envoyListener(family, passage, Leg.CONTEXT),
                envoyListener(family, passage, Leg.GENERATION),
                client);
        HttpServer server =
            startServer(
                family.engine().name() + " orchestrator " + passage.description(),
                ports.orchestrator(family, passage),
                orchestrator);
        orchestrators
            .computeIfAbsent(family, f -> new EnumMap<>(Passage.class))
            .put(passage, loopbackUri(server.getAddress().getPort()));
      }
    }
    startupProblems = StartupCheck.run(client, families, this::orchestrator);
    readyAfter = Duration.ofMillis(ManagementFactory.getRuntimeMXBean().getUptime());
  }

  /**
   * The service's defaults, on loopback, told the worker clusters as the shipped bootstrap's comment says,
   * and Envoy's {@code message_timeout} when {@code --message-timeout} replaced it.
   */
  private Config serviceConfig(SandboxPorts ports) {
    List<Setting> settings =
        new ArrayList<>(
            List.of(
                setting("grpc.listen", "127.0.0.1"),
                setting("grpc.port", Integer.toString(ports.serviceGrpc())),
                setting("admin.port", Integer.toString(ports.serviceAdmin())),
                setting("classification.context_clusters", clusters(Leg.CONTEXT)),
                setting("classification.generation_clusters", clusters(Leg.GENERATION)),
                // Envoy is stopped first: there is nothing left to drain
                setting("shutdown.drain_timeout", "1s")));
    messageTimeout.ifPresent(t -> settings.add(setting("grpc.envoy_message_timeout", t.toMillis() + "ms")));
    try {
      return ConfigLoader.load(null, Map.of(), settings);
    } catch (ConfigException e) {
      throw new IllegalStateException("the sandbox's service settings are invalid", e);
    }
  }

  private String clusters(Leg leg) {
    return families.stream().map(f -> f.cluster(leg)).collect(Collectors.joining(","));
  }

  private static Setting setting(String key, String value) {
    return new Setting(key, value, "sandbox");
  }

  /** The engine worker the shared simulation runs, on loopback, streaming visibly slowly. */
  private EngineWorker startWorker(Family family, Leg leg, int port) throws StartupException {
    WorkerSpec spec =
        WorkerSpec.of(family.kind(), leg == Leg.CONTEXT ? WorkerRole.PREFILL : WorkerRole.DECODE, LOOPBACK, port)
            .withModel(SeedRequest.MODEL)
            .withTokenDelay(EVENT_PAUSE);
    EngineWorker worker;
    try {
      worker = EngineWorker.start(spec);
    } catch (WorkerStartException e) {
      throw new StartupException(e.getMessage() + "; choose other ports with --port-base", e);
    }
    started.push(worker);
    return worker;
  }

  private HttpServer startServer(String role, int port, LoopbackHttp.PostHandler handler) throws StartupException {
    HttpServer server = LoopbackHttp.start(role, port, handler, handlers);
    started.push(() -> server.stop(0));
    return server;
  }

  private URI envoyListener(Family family, Passage passage, Leg leg) {
    return loopbackUri(envoy.listenerPort(passage.listenerName(family, leg)));
  }

  private static URI loopbackUri(int port) {
    return URI.create("http://127.0.0.1:" + port + "/");
  }

  /** The base URL of {@code family}'s orchestrator for {@code passage}, e.g. {@code http://127.0.0.1:18000/}. */
  URI orchestrator(Family family, Passage passage) {
    return orchestrators.get(family).get(passage);
  }

  List<Family> families() {
    return families;
  }

  EnvoyProcess envoy() {
    return envoy;
  }

  EnvoyBinary envoyBinary() {
    return envoyBinary;
  }

  /** The ext_proc filter's {@code message_timeout} when it is not the shipped one. */
  Optional<Duration> messageTimeout() {
    return messageTimeout;
  }

  /** The service's {@code /metrics}. */
  URI metrics() {
    return loopbackUri(service.adminPort()).resolve("metrics");
  }

  /** The folder with Envoy's bootstrap and log; kept after {@link #close()} so the log can be read. */
  public Path workDir() {
    return workDir;
  }

  /** JVM uptime when everything was up and the start-up requests had come back. */
  Duration readyAfter() {
    return readyAfter;
  }

  /** What the start-up requests found wrong; empty when the service corrected them. */
  public List<String> startupProblems() {
    return startupProblems;
  }

  /** What the command prints once started: the curl lines, the URLs, what to look for. */
  public String banner() {
    return SandboxBanner.render(this);
  }

  /** Blocks until {@link #close()} has finished. */
  public void awaitClosed() throws InterruptedException {
    closed.await();
  }

  /** Stops the orchestrators, Envoy, the workers and the service; idempotent, safe from a shutdown hook. */
  @Override
  public void close() {
    if (!closing.compareAndSet(false, true)) {
      try {
        closed.await();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      return;
    }
    try {
      while (!started.isEmpty()) {
        try {
          started.pop().close();
        } catch (Exception e) {
          // keep stopping the rest
        }
      }
    } finally {
      closed.countDown();
    }
  }
}
