package io.disaggusage.extproc.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.metrics.ModelLabels;
import io.disaggusage.extproc.testkit.Wire;
import io.prometheus.metrics.expositionformats.ExpositionFormats;
import io.disaggusage.extproc.scenario.Deployment.Driver;
import io.disaggusage.extproc.scenario.Deployment.Replica;
import io.disaggusage.extproc.scenario.Deployment.Store;
import io.disaggusage.extproc.scenario.VectorRunner.Splits;
import io.disaggusage.extproc.store.RedisServer;
import io.disaggusage.extproc.testkit.EngineRequests;
import io.disaggusage.extproc.testkit.ExpectedUsage;
import io.disaggusage.extproc.testkit.ScenarioVectors;
import io.disaggusage.extproc.testkit.ScenarioVectors.Vector;
import java.nio.charset.StandardCharsets;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * One exchange specification over a generated matrix, in the style of Caffeine's cache tests: every
 * vector of {@link ScenarioVectors#specification} × driver (direct, fake Envoy over gRPC) × chunking ×
 * store (memory, two replicas on a real Redis). Each case asserts the exact bytes the client of each leg
 * gets, the usages the OpenAI or Anthropic SDK reads from the generation response, the outcome
 * metadata and the exchange and token metrics, a clean protocol on both legs, the worker's request as
 * sent, and no entry or waiter left in any store; after every cell the {@link ExchangeInvariants}.
 * Beside the matrix, the cases it cannot express: a failed context attempt before the retry, and the
 * token metrics' hit ratios and bounded model labels.
 *
 * <p>Every chunking cuts all four bodies (both requests, both responses). The heaviest cells are a
 * documented subset: on memory every chunking; on Redis the chunkings of {@link #REDIS_CUTS} — no
 * byte-at-a-time, whose cost is messages and not the store's. Both drivers run on both stores. Every single split point and thousands of random splits per body are
 * {@link ChunkInvarianceTest}'s (direct driver, memory). {@code -Dspec.cases=REGEX} runs the matching
 * cells only. (Named {@code …Test} so that Surefire's default includes run it.)
 */
@ExchangeSpecification
class ExchangeSpecificationTest {
  /** A named chunking of every body. */
  record Cut(String name, Chunking chunking) {
    Splits splits() {
      return new Splits(chunking, chunking, chunking, chunking);
    }
  }

  static final List<Cut> CUTS =
      List.of(
          new Cut("whole", Chunking.whole()),
          new Cut("bytewise", Chunking.bytewise()),
          new Cut("fixed-7", Chunking.fixed(7)),
          new Cut("fixed-64", Chunking.fixed(64)),
          new Cut("random-1+empty", Chunking.random(1, 40).withEmptyFinalChunk()),
          new Cut("random-2+empty", Chunking.random(2, 90).withEmptyFinalChunk()));

  /** The chunkings run on Redis, through the fake Envoy only: whole, a fixed and a random cut (with an empty final chunk). */
  static final List<String> REDIS_CUTS = List.of("whole", "fixed-64", "random-1+empty");

  /** One cell of the matrix. */
  record Case(Vector vector, Driver driver, Cut cut, Store store) {
    @Override
    public String toString() {
      return vector.name() + " · " + driver + " · " + cut.name() + " · " + store;
    }
  }

  /** {@code -Dspec.cases=REGEX} runs only the cells whose name (vector · driver · chunking · store) matches. */
  static final Pattern ONLY = Pattern.compile(System.getProperty("spec.cases", ".*"));

  static Stream<Case> matrix() {
    return ScenarioVectors.specification().stream()
        .flatMap(v -> Stream.of(Store.values())
            .flatMap(s -> CUTS.stream()
                .filter(c -> s == Store.MEMORY || REDIS_CUTS.contains(c.name()))
                .flatMap(c -> Stream.of(Driver.values())
                    .map(d -> new Case(v, d, c, s)))))
        .filter(c -> ONLY.matcher(c.toString()).find());
  }

  private static RedisServer redis;
  private static final Map<Store, Map<Driver, Deployment>> DEPLOYMENTS = new EnumMap<>(Store.class);

  /** The deployment of a cell, opened on first use and kept for the class: flows drain what they store. */
  static synchronized Deployment deployment(Driver driver, Store store) throws Exception {
    if (store == Store.REDIS_REPLICAS && redis == null) {
      redis = RedisServer.start();
    }
    Map<Driver, Deployment> byDriver = DEPLOYMENTS.computeIfAbsent(store, s -> new EnumMap<>(Driver.class));
    Deployment d = byDriver.get(driver);
    if (d == null) {
      d = Deployment.open(driver, store, redis);
      byDriver.put(driver, d);
    }
    return d;
  }

  @AfterAll
  static void closeDeployments() throws Exception {
    for (Map<Driver, Deployment> byDriver : DEPLOYMENTS.values()) {
      for (Deployment d : byDriver.values()) {
        d.close();
      }
    }
    DEPLOYMENTS.clear();
    if (redis != null) {
      redis.close();
      redis = null;
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("matrix")
  void theClientGetsTheCorrectedUsage(Case c) throws Exception {
    assertSpecified(deployment(c.driver(), c.store()), c.vector(), c.cut().splits());
  }

  /**
   * A context attempt that failed (503, TensorRT-LLM's orchestrator then retries under a new
   * disagg_request_id) leaves nothing behind: the generation naming the retry is corrected by it.
   */
  @Test
  void aFailedContextAttemptBeforeTheRetryChangesNothing() throws Exception {
    Vector v = ScenarioVectors.all().stream().filter(x -> x.name().equals("trtRetriedContextCall")).findFirst().orElseThrow();
    Deployment d = deployment(Driver.FAKE_ENVOY, Store.MEMORY);
    for (Cut cut : CUTS) {
      ExchangeResult failed =
          Flows.run(
              d.context.fake().envoy,
              Exchange.post(EngineRequests.PATH, EngineRequests.trtRequest("context_only", ",\"disagg_request_id\":" + EngineRequests.TRT_ID))
                  .responseStatus(503)
                  .responseHeader("content-type", "application/json")
                  .responseBody("{\"error\":\"busy\"}"));
      Flows.assertClean(failed);
      assertSpecified(d, v, cut.splits());
    }
  }

  /** A context-first vLLM pair of {@code model} under {@code id}, the generation reporting {@code genCached}. */
  static void pair(ServiceUnderTest s, String id, String model, long prompt, long ctxCached, long genCached, long completion) {
    var results = Flows.contextFirst(
        s.envoy,
        Exchange.post(EngineRequests.PATH, "{\"model\":\"" + model + "\",\"kv_transfer_params\":{\"do_remote_decode\":true}}")
            .requestHeader("x-request-id", id)
            .responseHeader("content-type", "application/json")
            .responseBody(Wire.chatCompletion(id, Wire.usage(prompt, 1, ctxCached))),
        Exchange.post(EngineRequests.PATH, "{\"model\":\"" + model + "\",\"kv_transfer_params\":{\"do_remote_prefill\":true}}")
            .requestHeader("x-request-id", id)
            .responseHeader("content-type", "application/json")
            .responseBody(Wire.chatCompletion(id, Wire.usage(prompt, completion, genCached)).replace(Wire.MODEL, model))
            .responseChunking(Chunking.fixed(50)));
    Flows.assertClean(results[0]);
    Flows.assertClean(results[1]);
  }

  /** The metrics that let operators see the correction: true and reported hit ratios, one division each. */
  @Test
  void trueAndReportedHitRatiosAreOneDivisionEach() throws Exception {
    try (ServiceUnderTest s = new ServiceUnderTest(ServiceUnderTest.testConfig())) {
      pair(s, "a", "llama", 1000, 0, 1000, 10); // cache-busted: the worker says 100 % hit
      pair(s, "b", "llama", 1000, 900, 1000, 20); // a real prefix hit of 900
      Metrics m = s.metrics;
      assertThat(m.tokenCount("llama", "prompt")).isEqualTo(2000);
      assertThat(m.tokenCount("llama", "cached")).isEqualTo(900);
      assertThat(m.tokenCount("llama", "cached_reported")).isEqualTo(2000);
      assertThat(m.tokenCount("llama", "completion")).isEqualTo(30);
      double trueRatio = (double) m.tokenCount("llama", "cached") / m.tokenCount("llama", "prompt");
      double reportedRatio = (double) m.tokenCount("llama", "cached_reported") / m.tokenCount("llama", "prompt");
      assertThat(trueRatio).isEqualTo(0.45);
      assertThat(reportedRatio).isEqualTo(1.0);
      assertThat(scrape(m))
          .contains("disagg_usage_tokens_total{kind=\"cached\",model=\"llama\"} 900.0")
          .contains("disagg_usage_message_processing_seconds_count{message=\"response_body\"}")
          .contains("disagg_usage_message_processing_seconds_count{message=\"request_headers\"}")
          .contains("disagg_usage_active_streams");
    }
  }

  @Test
  void clientChosenModelNamesCannotExplodeCardinality() throws Exception {
    try (ServiceUnderTest s = new ServiceUnderTest(ServiceUnderTest.testConfig())) {
      for (int i = 0; i < 25; i++) {
        pair(s, "id" + i, "model-" + i, 10, 0, 10, 1);
      }
      long series =
          scrape(s.metrics).lines().filter(l -> l.startsWith("disagg_usage_tokens_total{") && l.contains("kind=\"prompt\"")).count();
      assertThat(series).isEqualTo(21); // the default 20 models plus "other"
      assertThat(s.metrics.tokenCount(ModelLabels.OTHER, "prompt")).isEqualTo(50);
    }
  }

  /** The Prometheus text a scrape of {@code m} returns. */
  static String scrape(Metrics m) throws java.io.IOException {
    java.io.ByteArrayOutputStream text = new java.io.ByteArrayOutputStream();
    ExpositionFormats.init().getPrometheusTextFormatWriter().write(text, m.registry().scrape());
    return text.toString();
  }

  /** Everything a vector specifies, run once on {@code deployment} with its bodies cut as {@code splits} says. */
  static void assertSpecified(Deployment deployment, Vector v, Splits splits) throws Exception {
    ExpectedUsage expected = v.usage();
    assertThat(expected).as("vector states its expected usage").isNotNull();
    Outcome outcome = outcome(expected.outcome());
    Counts before = Counts.of(deployment, modelOf(v), outcome);

    Deployment.Seen seen = deployment.run(v, splits);

    LegSeen gen = seen.generation();
    gen.assertClean();
    gen.assertUpstreamGot(v.generation());
    assertThat(gen.metadata("outcome")).as("outcome").isEqualTo(expected.outcome());
    assertBytes(gen.clientBody(), v.expectedGeneration(), "generation client bytes");
    String body = new String(gen.clientBody(), StandardCharsets.UTF_8);
    assertThat(expected.read().usages(body)).as("usage the SDK reads").isEqualTo(expected.clientUsages());
    assertThat(gen.metadata("corrected")).isEqualTo(Boolean.toString(expected.corrected()));
    assertFigures(gen, expected);
    if (v.context() != null) {
      seen.context().assertClean();
      seen.context().assertUpstreamGot(v.context());
      assertBytes(seen.context().clientBody(), v.context().responseBody(), "context client bytes");
    }

    // The exchange is counted on the service's side as it ends, which on a loaded machine can trail the
    // client's last byte (seen once: Redis, direct driver): wait for the count, bounded. A count that
    // never comes, or one too many, still fails below.
    Counts after = Counts.of(deployment, modelOf(v), outcome);
    for (long deadline = System.nanoTime() + 5_000_000_000L;
        after.generation == before.generation && System.nanoTime() < deadline;
        after = Counts.of(deployment, modelOf(v), outcome)) {
      Thread.sleep(5);
    }
    assertThat(after.generation - before.generation).as("generation exchanges " + outcome.label()).isEqualTo(1);
    assertThat(after.stored - before.stored).as("context exchanges stored").isEqualTo(v.context() == null ? 0 : 1);
    assertThat(after.tokens[0] - before.tokens[0]).as("prompt tokens counted").isEqualTo(expected.prompt());
    assertThat(after.tokens[1] - before.tokens[1]).as("cached tokens counted").isEqualTo(expected.cached());
    // A counter only grows: a negative reported count is in the metadata, not in the metric.
    assertThat(after.tokens[2] - before.tokens[2]).as("reported cached tokens counted")
        .isEqualTo(expected.reportedCached() == null ? 0 : Math.max(0, expected.reportedCached()));
    assertThat(after.tokens[3] - before.tokens[3]).as("completion tokens counted").isEqualTo(expected.completion());
    for (Replica r : deployment.replicas()) {
      assertThat(r.entries()).as("store drained").isZero();
      assertThat(r.store().waiters()).as("no waiter left").isZero();
    }
  }

  /** Exact bytes, shown as text when they differ. */
  static void assertBytes(byte[] actual, byte[] expected, String what) {
    if (!java.util.Arrays.equals(actual, expected)) {
      assertThat(new String(actual, StandardCharsets.UTF_8)).as(what).isEqualTo(new String(expected, StandardCharsets.UTF_8));
    }
    assertThat(actual).as(what).isEqualTo(expected);
  }

  /** The corrected figures under the service's and Envoy AI Gateway's key names. */
  static void assertFigures(LegSeen gen, ExpectedUsage expected) {
    Map<String, Long> figures =
        Map.of(
            "prompt_tokens", expected.prompt(),
            "cached_tokens", expected.cached(),
            "completion_tokens", expected.completion(),
            "total_tokens", expected.total(),
            "llm_input_token", expected.prompt(),
            "llm_cached_input_token", expected.cached(),
            "llm_output_token", expected.completion(),
            "llm_total_token", expected.total());
    figures.forEach((key, value) -> assertThat(gen.metadata(key)).as(key).isEqualTo(Long.toString(value)));
    Long reported = expected.reportedCached();
    assertThat(gen.metadata("reported_cached_tokens")).as("reported_cached_tokens")
        .isEqualTo(reported == null ? null : Long.toString(reported));
  }

  private static final Pattern MODEL = Pattern.compile("\"model\":\"([^\"]+)\"");

  /** The model label the token metrics use: the model the generation response names. */
  static String modelOf(Vector v) {
    Matcher m = MODEL.matcher(new String(v.expectedGeneration(), StandardCharsets.UTF_8));
    assertThat(m.find()).as("the generation response names its model").isTrue();
    return m.group(1);
  }

  /** The outcome a metadata label names. */
  static Outcome outcome(String label) {
    return java.util.Arrays.stream(Outcome.values()).filter(o -> o.label().equals(label)).findFirst().orElseThrow();
  }

  /** The counters a case moves: generation exchanges of one outcome, context exchanges stored, tokens of one model. */
  record Counts(long generation, long stored, long[] tokens) {
    static final String[] KINDS = {"prompt", "cached", "cached_reported", "completion"};

    static Counts of(Deployment d, String model, Outcome outcome) {
      long[] tokens = new long[KINDS.length];
      for (int i = 0; i < KINDS.length; i++) {
        tokens[i] = d.generation.metrics().tokenCount(model, KINDS[i]);
      }
      return new Counts(
          d.generation.metrics().exchangeCount(Phase.GENERATION, outcome),
          d.context.metrics().exchangeCount(Phase.CONTEXT, Outcome.STORED),
          tokens);
    }
  }
}
