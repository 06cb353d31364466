package io.disaggusage.bench.e2e;

import io.disaggusage.bench.Bodies;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.config.ConfigException;
import io.disaggusage.extproc.config.ConfigLoader;
import io.disaggusage.extproc.stream.ExtProcService;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.testkit.Wire;
import io.disaggusage.extproc.store.MemoryContextUsageStore;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.EnvoyStats;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * End to end over gRPC on loopback: a driver playing Envoy ({@link Driver}) runs context+generation exchange pairs in
 * {@code streams} closed-loop lanes (so at most that many ext_proc streams are open at once) against
 * the service and against the {@link NullProcessor}, alternating the two in every round. The
 * generation response is an SSE stream of {@value #CONTENT_EVENTS} content events, the usage event and
 * {@code [DONE]}, cut into chunks of 1–16 KiB; the context response is one JSON chunk.
 */
public final class EndToEnd {
  public static final int CONTENT_EVENTS = 300;
  public static final String CONTEXT_CLUSTER = "context-pool";
  public static final String GENERATION_CLUSTER = "generation-pool";
  public static final String PATH = "/v1/chat/completions";
  private static final String PROMPT =
      "[{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},"
          + "{\"role\":\"user\",\"content\":\"What is the capital of France? Answer in detail.\"}]";
  /** A vLLM prefill request: {@code kv_transfer_params.do_remote_decode}, one token, JSON. */
  public static final String CONTEXT_REQUEST =
      "{\"model\":\"" + Wire.MODEL + "\",\"messages\":" + PROMPT
          + ",\"max_tokens\":1,\"stream\":false,\"kv_transfer_params\":{\"do_remote_decode\":true,\"do_remote_prefill\":false}}";
  /** The matching vLLM decode request: the same prompt, {@code do_remote_prefill}, streamed with usage. */
  public static final String GENERATION_REQUEST =
      "{\"model\":\"" + Wire.MODEL + "\",\"messages\":" + PROMPT
          + ",\"max_tokens\":300,\"stream\":true,\"stream_options\":{\"include_usage\":true},"
          + "\"kv_transfer_params\":{\"do_remote_decode\":false,\"do_remote_prefill\":true,"
          + "\"remote_engine_id\":\"engine-0\",\"remote_block_ids\":[1,2,3,4],\"remote_host\":\"10.0.0.7\",\"remote_port\":5600}}";
  private static final byte[] GENERATION_STREAM = Bodies.chatStream(CONTENT_EVENTS, 11);
  private static final byte[] CONTEXT_RESPONSE =
      Wire.chatCompletion("ctx", Bodies.CONTEXT_USAGE).getBytes(java.nio.charset.StandardCharsets.UTF_8);

  /** What one server did at one concurrency, summed over the rounds. */
  public record Side(
      String name, long chunks, double seconds, long p50Nanos, long p99Nanos, double serverCpuNanosPerChunk,
      double driverCpuShare, long pairs, long problems) {
    public double chunksPerSecond() {
      return chunks / seconds;
    }
  }

  /** One concurrency level: the service and the floor. */
  public record Level(int streams, Side service, Side floor) {}

  /** Who plays Envoy. */
  public enum Driver {
    /** {@link LeanEnvoy}: the protocol only, so the servers' cost is not buried under the driver's. */
    LEAN,
    /** The test suite's fake Envoy: every filter rule, timer and check (and their CPU cost). */
    FAKE_ENVOY
  }

  private EndToEnd() {}

  /**
   * The service's configuration: the embedded defaults plus the benchmark's cluster names, read the
   * way an operator's file is.
   */
  public static Config config() {
    try {
      return ConfigLoader.fromYaml(
          "classification:\n  context_clusters: [" + CONTEXT_CLUSTER + "]\n  generation_clusters: ["
              + GENERATION_CLUSTER + "]\n");
    } catch (ConfigException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * Runs every level: per round, the floor then the service in even rounds and the other way round
   * in odd ones, each with {@code warmup} then {@code measure}.
   */
  public static List<Level> run(
      Driver driver, int[] levels, Duration warmup, Duration measure, int rounds, Consumer<String> log)
      throws Exception {
    ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
    Config config = config();
    MemoryContextUsageStore store =
        new MemoryContextUsageStore(config.store().ttl(), config.store().maxEntries(), timer);
    List<Level> out = new ArrayList<>();
    try (Target service = new Target("service", new ExtProcService(config, store, Metrics.standalone(), timer), store);
        Target floor = new Target("null", new NullProcessor(), null)) {
      for (int streams : levels) {
        Acc s = new Acc(service.name);
        Acc f = new Acc(floor.name);
        for (int round = 0; round < rounds; round++) {
          boolean floorFirst = round % 2 == 0;
          measure(driver, floorFirst ? floor : service, floorFirst ? f : s, streams, warmup, measure);
          measure(driver, floorFirst ? service : floor, floorFirst ? s : f, streams, warmup, measure);
        }
        Level level = new Level(streams, s.side(), f.side());
        log.accept(
            String.format(
                java.util.Locale.ROOT,
                "%s %3d streams: service %.0f chunks/s p50 %d us p99 %d us | null %.0f chunks/s p50 %d us p99 %d us",
                driver == Driver.LEAN ? "lean driver" : "fake Envoy ",
                streams,
                level.service().chunksPerSecond(),
                level.service().p50Nanos() / 1000,
                level.service().p99Nanos() / 1000,
                level.floor().chunksPerSecond(),
                level.floor().p50Nanos() / 1000,
                level.floor().p99Nanos() / 1000));
        out.add(level);
      }
    } finally {
      timer.shutdownNow();
    }
    return out;
  }

  /** Sums of one side over its rounds. */
  private static final class Acc {
    final String name;
    final LatencyHistogram latency = new LatencyHistogram();
    long chunks;
    long nanos;
    long serverCpu;
    long totalCpu;
    long pairs;
    long problems;

    Acc(String name) {
      this.name = name;
    }

    Side side() {
      double driverShare = totalCpu == 0 ? 0 : (totalCpu - serverCpu) / (double) totalCpu;
      return new Side(
          name, chunks, nanos / 1e9, latency.percentile(0.50), latency.percentile(0.99),
          chunks == 0 ? 0 : serverCpu / (double) chunks, driverShare, pairs, problems);
    }
  }

  private static void measure(Driver driver, Target target, Acc acc, int streams, Duration warmup, Duration measure)
      throws Exception {
    System.gc();
    AtomicBoolean stop = new AtomicBoolean();
    AtomicLong pairs = new AtomicLong();
    AtomicLong problems = new AtomicLong();
    EnvoyStats stats = target.envoy.stats();
    long timeoutsBefore = stats.messageTimeouts() + stats.streamsFailed() + stats.spuriousMsgsReceived();
    List<CompletableFuture<Void>> lanes = new ArrayList<>();
    AtomicLong ids = new AtomicLong();
    for (int i = 0; i < streams; i++) {
      CompletableFuture<Void> done = new CompletableFuture<>();
      lanes.add(done);
      next(driver, target, stop, ids, pairs, problems, done);
    }
    Thread.sleep(warmup.toMillis());
    reset(driver, target);
    long pairs0 = pairs.get();
    Map<Long, Long> cpu0 = threadCpu();
    long process0 = processCpu();
    long t0 = System.nanoTime();
    Thread.sleep(measure.toMillis());
    long t1 = System.nanoTime();
    long chunks = driver == Driver.LEAN ? target.lean.replies() : target.clock.replies();
    Map<Long, Long> cpu1 = threadCpu();
    long process1 = processCpu();
    LatencyHistogram snapshot = new LatencyHistogram();
    (driver == Driver.LEAN ? target.lean.latency() : target.clock.latency()).addTo(snapshot);
    long pairs1 = pairs.get();
    stop.set(true);
    CompletableFuture.allOf(lanes.toArray(CompletableFuture[]::new)).get(120, TimeUnit.SECONDS);
    snapshot.addTo(acc.latency);
    acc.chunks += chunks;
    acc.nanos += t1 - t0;
    acc.serverCpu += cpuDelta(cpu0, cpu1, target.threadPrefix);
    acc.totalCpu += process1 - process0;
    acc.pairs += pairs1 - pairs0;
    long timeoutsAfter = stats.messageTimeouts() + stats.streamsFailed() + stats.spuriousMsgsReceived();
    acc.problems += problems.get() + (timeoutsAfter - timeoutsBefore);
  }

  private static void reset(Driver driver, Target target) {
    if (driver == Driver.LEAN) {
      target.lean.reset();
    } else {
      target.clock.reset();
    }
  }

  /** Starts the next pair of a lane, or ends the lane once {@code stop} is set. */
  private static void next(
      Driver driver, Target target, AtomicBoolean stop, AtomicLong ids, AtomicLong pairs, AtomicLong problems,
      CompletableFuture<Void> done) {
    if (stop.get()) {
      done.complete(null);
      return;
    }
    long n = ids.incrementAndGet();
    boolean verify = n % 64 == 0;
    CompletableFuture<String> pair = driver == Driver.LEAN ? leanPair(target, n, verify) : fakePair(target, n, verify);
    pair.whenComplete((body, error) -> {
      if (error != null) {
        problems.incrementAndGet();
        done.completeExceptionally(error);
        return;
      }
      if (verify && !verified(target, body)) {
        problems.incrementAndGet();
      }
      pairs.incrementAndGet();
      next(driver, target, stop, ids, pairs, problems, done);
    });
  }

  /** A pair through the fake Envoy; completes with the generation body the client received. */
  private static CompletableFuture<String> fakePair(Target target, long n, boolean verify) {
    String id = target.name + "-" + n;
    return target.envoy.start(context(id)).result()
        .thenCompose(ctx -> {
          if (ctx.clientResponse().status() != 200) {
            throw new IllegalStateException("context exchange answered " + ctx.clientResponse().status());
          }
          return target.envoy.start(generation(id, n)).result();
        })
        .thenApply(gen -> {
          if (gen.clientResponse().status() != 200) {
            throw new IllegalStateException("generation exchange answered " + gen.clientResponse().status());
          }
          return verify ? gen.clientResponse().bodyUtf8() : "";
        });
  }

  private static final byte[] CONTEXT_REQUEST_BYTES = CONTEXT_REQUEST.getBytes(java.nio.charset.StandardCharsets.UTF_8);
  private static final byte[] GENERATION_REQUEST_BYTES =
      GENERATION_REQUEST.getBytes(java.nio.charset.StandardCharsets.UTF_8);
  private static final LeanEnvoy.Shape CONTEXT_SHAPE =
      LeanEnvoy.Shape.of(CONTEXT_CLUSTER, CONTEXT_REQUEST_BYTES, "application/json", List.of(CONTEXT_RESPONSE));
  private static final List<LeanEnvoy.Shape> GENERATION_SHAPES = generationShapes();

  private static List<LeanEnvoy.Shape> generationShapes() {
    List<LeanEnvoy.Shape> shapes = new ArrayList<>();
    for (int seed = 0; seed < 16; seed++) {
      shapes.add(LeanEnvoy.Shape.of(GENERATION_CLUSTER, GENERATION_REQUEST_BYTES, "text/event-stream",
          Bodies.chunks(GENERATION_STREAM, 1024, 16 * 1024, seed)));
    }
    return shapes;
  }

  /** A pair through the lean driver; completes with the generation body the client received. */
  private static CompletableFuture<String> leanPair(Target target, long n, boolean verify) {
    String id = target.name + "-" + n;
    return target.lean.exchange(PATH, id, CONTEXT_SHAPE, CONTEXT_REQUEST_BYTES.length, false)
        .thenCompose(ctx -> target.lean.exchange(
            PATH, id, GENERATION_SHAPES.get((int) (n % GENERATION_SHAPES.size())), GENERATION_REQUEST_BYTES.length, verify))
        .thenApply(body -> new String(body, java.nio.charset.StandardCharsets.UTF_8));
  }

  /** A sample of generation responses is checked: corrected by the service, untouched by the floor. */
  private static boolean verified(Target target, String body) {
    if (!body.endsWith(Wire.DONE)) {
      return false;
    }
    boolean corrected = body.contains("\"prompt_tokens_details\":{\"cached_tokens\":7}");
    return target.name.equals("null") ? !corrected : corrected;
  }

  static Exchange context(String id) {
    return Exchange.post(PATH, CONTEXT_REQUEST)
        .name("ctx-" + id)
        .requestHeader("x-request-id", id)
        .requestAttribute("xds.cluster_name", CONTEXT_CLUSTER)
        .responseHeader("content-type", "application/json")
        .responseBody(CONTEXT_RESPONSE)
        .responseContentLength()
        .build();
  }

  static Exchange generation(String id, long seed) {
    return Exchange.post(PATH, GENERATION_REQUEST)
        .name("gen-" + id)
        .requestHeader("x-request-id", id)
        .requestAttribute("xds.cluster_name", GENERATION_CLUSTER)
        .responseHeader("content-type", "text/event-stream")
        .responseBody(GENERATION_STREAM)
        .responseChunking(body -> Bodies.chunks(body, 1024, 16 * 1024, seed))
        .build();
  }

  private static Map<Long, Long> threadCpu() {
    ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    Map<Long, Long> out = new HashMap<>();
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      long c = mx.getThreadCpuTime(t.getId());
      if (c > 0) {
        out.put(t.getId(), c);
      }
    }
    return out;
  }

  private static long cpuDelta(Map<Long, Long> before, Map<Long, Long> after, String prefix) {
    long sum = 0;
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      if (t.getName().startsWith(prefix) && after.containsKey(t.getId())) {
        sum += after.get(t.getId()) - before.getOrDefault(t.getId(), 0L);
      }
    }
    return sum;
  }

  private static long processCpu() {
    return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
  }
}
