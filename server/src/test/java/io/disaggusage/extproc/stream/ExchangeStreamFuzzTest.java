package io.disaggusage.extproc.stream;

import static org.assertj.core.api.Assertions.assertThat;

import com.code_intelligence.jazzer.junit.FuzzTest;
import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.scenario.DirectEnvoy;
import io.disaggusage.extproc.testkit.ScenarioVectors;
import io.disaggusage.extproc.testkit.ScenarioVectors.Leg;
import io.disaggusage.extproc.testkit.ScenarioVectors.Order;
import io.disaggusage.extproc.testkit.ScenarioVectors.Vector;
import io.disaggusage.extproc.scenario.ServiceUnderTest;
import io.disaggusage.extproc.scenario.VectorRunner;
import io.disaggusage.extproc.sse.SseEvent;
import io.disaggusage.extproc.sse.SseFramer;
import io.disaggusage.extproc.sse.SseItem;
import io.disaggusage.extproc.store.MemoryContextUsageStore;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.testkit.FuzzInput;
import io.disaggusage.extproc.usage.ApiShape;
import io.disaggusage.extproc.usage.ApiShapes;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.JsonUsageRewriter;
import io.disaggusage.extproc.usage.UsageDocument;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledThreadPoolExecutor;

/**
 * Fuzzes the whole per-exchange state machine ({@link ExchangeStream}) through {@link DirectEnvoy}:
 *
 * <ul>
 *   <li>{@link #generationBodyIsRewrittenOrUntouched}: an engine vector whose generation response body is
 *       the fuzz input, under fuzzed limits, order and chunking. No exception escapes, every message
 *       gets its one reply in order, the bytes do not depend on the chunking, and the client gets
 *       either the input byte for byte or, with outcome {@code rewritten}, the §2 rewrite of it and
 *       nothing else; the context client always gets its bytes untouched; no waiter and no open
 *       stream is left.
 *   <li>{@link ExchangeMessagesFuzzTest}: arbitrary message sequences.
 * </ul>
 * Corpus: {@code ExchangeStreamFuzzTestInputs/}.
 */
public class ExchangeStreamFuzzTest {
  public static final ScheduledThreadPoolExecutor TIMER = timer();
  static final Duration WAIT = Duration.ofMillis(200);
  static final List<Vector> VECTORS =
      ScenarioVectors.all().stream()
          .filter(v -> v.order() != Order.CARRIED && v.context().contentType().equals("application/json"))
          .toList();
  static final JsonFactory JSON = UsageDocument.newFactory(16 * 1024 * 1024);
  static final int[][] LIMITS = {
    {16 * 1024 * 1024, 1024 * 1024}, {256, 64}, {4096, 16}, {64, 1 << 20}
  };

  static ScheduledThreadPoolExecutor timer() {
    ScheduledThreadPoolExecutor t = (ScheduledThreadPoolExecutor) Executors.newScheduledThreadPool(1, r -> {
      Thread th = new Thread(r, "fuzz-timer");
      th.setDaemon(true);
      return th;
    });
    t.setRemoveOnCancelPolicy(true);
    return t;
  }

  /** A fresh service: config, store and metrics of its own. */
  public record Service(Config config, MemoryContextUsageStore store, Metrics metrics, DirectEnvoy envoy) {
    public static Service start(int maxBody, int maxEvent) {
      // A short wait: a fuzzed context response that is not stored (oversize, malformed) leaves the
      // generation waiting until this deadline.
      Config d = ServiceUnderTest.testConfig(WAIT);
      Config config =
          new Config(d.grpc(), d.admin(), d.classification(), d.ordering(), d.store(), d.metadata(),
              new Config.Limits(
                  maxBody, maxEvent, d.limits().maxUsageBytes(), d.limits().maxKeyBytes(), d.limits().maxWaiters()),
              d.metrics(), d.logging(), d.shutdown(), d.streaming(), d.edgeGuard());
      MemoryContextUsageStore store = new MemoryContextUsageStore(config.store().ttl(), 1000, TIMER);
      Metrics metrics = Metrics.standalone();
      return new Service(config, store, metrics, new DirectEnvoy(new ExtProcService(config, store, metrics, TIMER)));
    }
  }

  @FuzzTest(maxDuration = "60s")
  void generationBodyIsRewrittenOrUntouched(byte[] input) throws Exception {
    FuzzInput in = new FuzzInput(input);
    Vector base = VECTORS.get(in.choose(VECTORS.size()));
    int[] limits = LIMITS[in.choose(LIMITS.length)];
    boolean sse = in.flag();
    boolean generationFirst = in.flag();
    long seed = in.nextInt();
    checkGeneration(base, in.document(), sse, generationFirst, limits, seed);
  }

  static void checkGeneration(Vector base, byte[] body, boolean sse, boolean generationFirst, int[] limits, long seed)
      throws Exception {
    Leg g = base.generation();
    Leg gen = new Leg(g.path(), g.requestHeaders(), g.cluster(), g.requestBody(), sse ? "text/event-stream" : "application/json", body);
    // Generation-first only where the flow is concurrent (the context-first miss is decided at headers).
    Map<String, String> headers = new java.util.LinkedHashMap<>(gen.requestHeaders());
    if (generationFirst) {
      headers.put("x-disagg-order", "concurrent");
    }
    gen = new Leg(gen.path(), Map.copyOf(headers), gen.cluster(), gen.requestBody(), gen.contentType(), gen.responseBody());
    Vector v = new Vector(base.name(), generationFirst ? Order.GENERATION_FIRST : Order.CONTEXT_FIRST, base.context(), gen, body);

    VectorRunner.Splits whole = new VectorRunner.Splits(Chunking.whole(), Chunking.whole(), Chunking.whole(), Chunking.whole());
    VectorRunner.Splits random =
        new VectorRunner.Splits(Chunking.random(seed, 50), Chunking.random(seed + 1, 80), Chunking.random(seed + 2, 30),
            (seed & 1) == 0 ? Chunking.random(seed + 3, 1 + (int) ((seed >>> 8) & 63)) : Chunking.random(seed + 3, 7).withEmptyFinalChunk());
    String[] outcome = new String[2];
    byte[][] client = new byte[2][];
    int i = 0;
    for (VectorRunner.Splits splits : List.of(whole, random)) {
      Service s = Service.start(limits[0], limits[1]);
      VectorRunner.Outcome o = VectorRunner.run(s.envoy(), v, splits);
      assertThat(o.problem()).as("protocol").isNull();
      assertThat(o.context().clientBody()).as("context untouched").isEqualTo(v.context().responseBody());
      assertThat(s.store().waiters()).as("waiters").isZero();
      assertThat(s.metrics().activeStreams()).as("active streams").isZero();
      outcome[i] = o.generation().metadata("disagg_usage", "outcome");
      client[i] = o.generation().clientBody();
      s.store().close();
      i++;
    }
    assertThat(client[1]).as("chunk invariant (seed %d)", seed).isEqualTo(client[0]);
    assertThat(outcome[1]).as("outcome chunk invariant (seed %d)", seed).isEqualTo(outcome[0]);
    byte[] out = client[0];
    boolean impossible = "impossible_count".equals(outcome[0]);
    if (!"rewritten".equals(outcome[0]) && !impossible) {
      assertThat(out).as("untouched unless rewritten (outcome %s)", outcome[0]).isEqualTo(body);
      return;
    }
    // An impossible count is corrected with the context usage, or clamped without it (a deadline passed).
    ContextUsage c = contextUsage(base);
    ApiShape names = ApiShapes.forPath(gen.path());
    JsonUsageRewriter rewriter = new JsonUsageRewriter(JSON, 64 * 1024);
    if (!sse) {
      assertOneOf(out, rewritten(rewriter.rewrite(body, c, names)), impossible ? rewritten(rewriter.rewrite(body, null, names)) : null);
      return;
    }
    List<SseItem> before = SseFramer.frameAll(body, limits[1]);
    List<SseItem> after = SseFramer.frameAll(out, limits[1]);
    assertThat(after).hasSameSizeAs(before);
    for (int k = 0; k < before.size(); k++) {
      if (Arrays.equals(before.get(k).rawArray(), after.get(k).rawArray())) {
        continue;
      }
      SseEvent e = (SseEvent) before.get(k);
      assertOneOf(((SseEvent) after.get(k)).payloadBytes(), rewritten(rewriter.rewriteEvent(e.payloadBytes(), c, names)),
          impossible ? rewritten(rewriter.rewriteEvent(e.payloadBytes(), null, names)) : null);
    }
  }

  /** {@code actual} is the first expected document, or else the second (null: none). */
  static void assertOneOf(byte[] actual, byte[] expected, byte[] orElse) {
    if (orElse != null && Arrays.equals(actual, orElse)) {
      return;
    }
    assertThat(actual).isEqualTo(expected);
  }

  /** The document a rewrite gives; null when it was not rewritten. */
  static byte[] rewritten(JsonUsageRewriter.Result r) {
    return r instanceof JsonUsageRewriter.Rewritten w ? w.document() : null;
  }

  static ContextUsage contextUsage(Vector v) throws Exception {
    byte[] doc = v.context().responseBody();
    return ApiShapes.context(UsageDocument.parse(JSON, doc).usage(), doc).orElseThrow();
  }

}
