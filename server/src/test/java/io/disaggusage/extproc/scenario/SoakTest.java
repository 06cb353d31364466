package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.Wire;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.EnvoyProfile;
import io.disaggusage.extproc.emulator.envoy.EnvoyStats;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeHandle;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAccumulator;
import org.junit.jupiter.api.Test;

/**
 * Sustained mixed load through the fake Envoy over gRPC: context-first and generation-first pairs
 * (JSON and SSE, random chunkings), unrelated traffic, and failures (non-2xx, compressed, malformed,
 * client resets, contexts that never come). Every client response must be exactly the corrected one or
 * exactly the worker's; and over the run the heap after GC and the store stay flat, and at the end no
 * stream, waiter or entry is left.
 *
 * <p>Runs for {@code -Dsoak.duration} (default 12s in the build; {@code mvn -Psoak -pl server test
 * -Dsoak.duration=10m} for a long run), on {@code -Dsoak.threads} client threads (default 4), from
 * {@code -Dsoak.seed} (default: the clock; printed on failure).
 */
class SoakTest {
  static final Duration DURATION = Duration.parse("PT" + System.getProperty("soak.duration", "12s").toUpperCase());
  static final int THREADS = Integer.getInteger("soak.threads", 4);
  static final long SEED = Long.getLong("soak.seed", System.nanoTime());
  static final String PATH = "/v1/chat/completions";
  static final String CTX_REQ = "{\"model\":\"m\",\"kv_transfer_params\":{\"do_remote_decode\":true}}";
  static final String GEN_REQ = "{\"model\":\"m\",\"kv_transfer_params\":{\"do_remote_prefill\":true}}";
  static final Duration WAIT = Duration.ofMillis(1000);
  static final Duration TTL = Duration.ofSeconds(2);

  final Map<String, AtomicLong> counts = new ConcurrentHashMap<>();

  void count(String kind) {
    counts.computeIfAbsent(kind, k -> new AtomicLong()).incrementAndGet();
  }

  static Config config() {
    Config d = ServiceUnderTest.testConfig(WAIT);
    return new Config(d.grpc(), d.admin(), d.classification(), d.ordering(),
        new Config.Store(d.store().type(), TTL, d.store().redisUri(), 10_000,
            d.store().keyPrefix(), d.store().redisTimeout(), d.store().redisCluster()),
        d.metadata(), d.limits(), d.metrics(), d.logging(), d.shutdown(), d.streaming(), d.edgeGuard());
  }

  /**
   * The smallest heap seen over three full collections. {@link MemoryMXBean#gc()} returns once its
   * collection is over (explicit GC is not concurrent by default), so each reading follows one.
   */
  static long heapAfterGc(MemoryMXBean memory) {
    long best = Long.MAX_VALUE;
    for (int i = 0; i < 3; i++) {
      memory.gc();
      best = Math.min(best, memory.getHeapMemoryUsage().getUsed());
    }
    return best;
  }

  @Test
  void sustainedMixedLoadKeepsResponsesCorrectAndMemoryFlat() throws Exception {
    MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
    try (ServiceUnderTest s = new ServiceUnderTest(config(), ServiceUnderTest.Transport.NETTY_LOOPBACK, EnvoyProfile.V1_37)) {
      // Warm-up: the first seconds load classes and fill caches; the heap is measured after them.
      runFor(s, Duration.ofSeconds(Math.min(3, Math.max(1, DURATION.getSeconds() / 4))), SEED - 1);
      long heapStart = heapAfterGc(memory);
      counts.clear();
      long storeMax = runFor(s, DURATION, SEED);
      s.awaitStreamsEnded(); // every put made
      s.passStoreTtl();
      long heapEnd = heapAfterGc(memory);
      String summary = "seed " + SEED + ", counts " + counts + ", heap " + heapStart / 1024 + " KiB -> " + heapEnd / 1024 + " KiB";
      System.out.println("soak: " + summary);
      assertThat(counts.get("pair")).as(summary).isNotNull();
      // Timeouts are the machine's doing, not the service's: tolerated, but they must stay rare.
      long corrected = counts.get("pair").get() + counts.getOrDefault("generation-first", new AtomicLong()).get();
      long untouched =
          counts.getOrDefault("message-timeout", new AtomicLong()).get()
              + counts.getOrDefault("untouched-context-timeout", new AtomicLong()).get();
      assertThat(untouched).as("timeouts: " + summary).isLessThanOrEqualTo(corrected / 5);
      assertThat(s.metrics.activeStreams()).as(summary).isZero();
      assertThat(s.store.waiters()).as(summary).isZero();
      assertThat(s.store.size()).as(summary).isZero();
      assertThat(storeMax).as("store bounded: " + summary).isLessThan(5_000);
      // Flat heap: what a run leaves behind after GC is within a fixed margin of where it started.
      assertThat(heapEnd - heapStart).as("heap growth: " + summary).isLessThan(48L * 1024 * 1024);
    }
  }

  /** Runs the mix on THREADS threads for {@code duration}; returns the largest store size sampled. */
  long runFor(ServiceUnderTest s, Duration duration, long seed) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(THREADS);
    long end = System.nanoTime() + duration.toNanos();
    List<Future<?>> futures = new ArrayList<>();
    LongAccumulator storeMax = new LongAccumulator(Math::max, 0);
    for (int t = 0; t < THREADS; t++) {
      long threadSeed = seed * 31 + t;
      futures.add(pool.submit(() -> {
        Random rnd = new Random(threadSeed);
        long n = 0;
        while (System.nanoTime() < end) {
          one(s, rnd, "t" + threadSeed + "-" + n++);
          storeMax.accumulate(s.store.size()); // sampled after every exchange
        }
        return null;
      }));
    }
    for (Future<?> f : futures) {
      f.get(); // rethrows a failed assertion with its message (seed included)
    }
    pool.shutdown();
    return storeMax.get();
  }

  static Chunking chunking(Random rnd) {
    return switch (rnd.nextInt(4)) {
      case 0 -> Chunking.whole();
      case 1 -> Chunking.fixed(1 + rnd.nextInt(64));
      case 2 -> Chunking.random(rnd.nextLong(), 1 + rnd.nextInt(200)).withEmptyFinalChunk();
      default -> Chunking.random(rnd.nextLong(), 3);
    };
  }

  void one(ServiceUnderTest s, Random rnd, String key) throws InterruptedException {
    long prompt = 10 + rnd.nextInt(5000);
    long cached = rnd.nextInt((int) prompt);
    long completion = 1 + rnd.nextInt(500);
    boolean sse = rnd.nextBoolean();
    String genUsage = Wire.usage(prompt, completion, prompt);
    String genBody = sse ? Wire.chatStream(genUsage, "a", "b", "c") : Wire.chatCompletion(key, genUsage);
    String corrected = genBody.replace("{\"cached_tokens\":" + prompt + "}", "{\"cached_tokens\":" + cached + "}");
    String ctxBody = Wire.chatCompletion(key, Wire.usage(prompt, 1, cached));
    Exchange.Builder ctx =
        Exchange.post(PATH, CTX_REQ).requestHeader("x-request-id", key)
            .responseHeader("content-type", "application/json").responseBody(ctxBody).responseChunking(chunking(rnd));
    Exchange.Builder gen =
        Exchange.post(PATH, GEN_REQ).requestHeader("x-request-id", key)
            .responseHeader("content-type", sse ? "text/event-stream" : "application/json")
            .responseBody(genBody).responseChunking(chunking(rnd));
    String as = "seed " + SEED + " key " + key;
    int kind = rnd.nextInt(100);
    if (kind < 40) {
      ExchangeResult[] r = Flows.contextFirst(s.envoy, ctx, gen);
      clean(r[0], as);
      clean(r[1], as);
      assertThat(r[0].clientResponse().bodyUtf8()).as(as).isEqualTo(ctxBody);
      correctOrUntouched(r[0], r[1], corrected, genBody, as);
      count("pair");
    } else if (kind < 60) {
      ExchangeResult[] r = generationFirst(s, ctx, gen.requestHeader("x-disagg-order", "concurrent"));
      clean(r[0], as);
      clean(r[1], as);
      correctOrUntouched(r[0], r[1], corrected, genBody, as);
      count("generation-first");
    } else if (kind < 72) {
      ExchangeResult r = Flows.run(s.envoy, Exchange.post("/v1/embeddings", "{\"input\":\"x\"}").responseBody("{\"data\":[]}"));
      clean(r, as);
      assertThat(r.clientResponse().bodyUtf8()).isEqualTo("{\"data\":[]}");
      count("unrelated");
    } else if (kind < 78) {
      // A generation whose context never comes: the worker's own usage after the wait.
      untouched(Flows.run(s.envoy, gen.requestHeader("x-disagg-order", "concurrent")), genBody, as, "context-never-comes");
    } else if (kind < 84) {
      untouched(Flows.run(s.envoy, gen.responseStatus(503)), genBody, as, "non-2xx");
    } else if (kind < 88) {
      untouched(Flows.run(s.envoy, gen.responseHeader("content-encoding", "gzip")), genBody, as, "compressed");
    } else if (kind < 92) {
      Flows.run(s.envoy, ctx);
      String broken = genBody.substring(0, genBody.length() / 2);
      ExchangeResult r = Flows.run(s.envoy, gen.responseBody(broken));
      clean(r, as);
      assertThat(r.clientResponse().bodyUtf8()).as(as).isEqualTo(broken);
      count("malformed");
    } else {
      // The client goes away mid-response (context stored first, so a waiting entry may be left to expire).
      Flows.run(s.envoy, ctx);
      ExchangeHandle h = s.envoy.start(gen.downstreamResetAfterResponseChunks(1).responseChunking(Chunking.fixed(16)).build());
      ExchangeResult r = h.awaitResult();
      assertThat(r.clientResponse().reset()).as(as).isTrue();
      count("client-reset");
    }
  }

  /**
   * {@link Flows#generationFirst}, tolerant of a message timeout on a loaded machine: then Envoy stops
   * sending the generation's body to the service, and the context is released once the generation
   * exchange is over instead.
   */
  static ExchangeResult[] generationFirst(ServiceUnderTest s, Exchange.Builder ctx, Exchange.Builder gen) throws InterruptedException {
    ExchangeHandle g = s.envoy.start(gen.gateRequestBody().gateResponseBody().build());
    g.awaitRequestHeadersForwarded();
    g.releaseRequestBody();
    ExchangeHandle c = s.envoy.start(ctx.gateRequestBody().gateResponseBody().build());
    c.awaitRequestHeadersForwarded();
    c.releaseRequestBody();
    g.awaitResponseHeadersForwarded();
    g.releaseResponseBody();
    g.awaitResponseEndSent();
    c.awaitResponseHeadersForwarded();
    c.releaseResponseBody();
    return new ExchangeResult[] {c.awaitResult(), g.awaitResult()};
  }

  /**
   * Corrected — or untouched, when Envoy's message timer fired on either leg (fail-open) or the context
   * leg took longer than {@code ordering.context_wait} on a loaded machine (then the outcome says
   * {@code context_timeout}). Never anything else.
   */
  void correctOrUntouched(ExchangeResult ctx, ExchangeResult r, String corrected, String original, String as) {
    String body = r.clientResponse().bodyUtf8();
    String outcome = r.accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%");
    if (failedOpen(ctx) > 0 || failedOpen(r) > 0) {
      assertThat(body).as(as + " after a message timeout").isIn(corrected, original);
      count("message-timeout");
    } else if (outcome.equals("context_timeout")) {
      // The context leg was slower than ordering.context_wait on a loaded machine: the worker's usage.
      assertThat(body).as(as + " after the context wait").isEqualTo(original);
      count("untouched-context-timeout");
    } else {
      assertThat(outcome).as(as).isEqualTo("rewritten");
      assertThat(body).as(as).isEqualTo(corrected);
    }
  }

  static long failedOpen(ExchangeResult r) {
    return r.stats().get(EnvoyStats.MESSAGE_TIMEOUTS) + r.stats().get(EnvoyStats.FAILURE_MODE_ALLOWED);
  }

  /** An exchange the service must let through as the worker sent it: clean, the worker's body, counted as {@code kind}. */
  void untouched(ExchangeResult r, String workerBody, String as, String kind) {
    clean(r, as);
    assertThat(r.clientResponse().bodyUtf8()).as(as).isEqualTo(workerBody);
    count(kind);
  }

  static void clean(ExchangeResult r, String as) {
    assertThat(r.clientResponse().reset()).as(as + " reset").isFalse();
    assertThat(r.clientResponse().localReply()).as(as + " local reply").isEmpty();
    assertThat(r.stats().get(EnvoyStats.SPURIOUS_MSGS_RECEIVED)).as(as + " spurious").isZero();
    assertThat(r.contentLengthMismatch()).as(as + " content-length").isFalse();
  }
}
