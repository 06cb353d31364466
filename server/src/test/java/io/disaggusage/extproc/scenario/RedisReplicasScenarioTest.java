package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.OpenAiClientView;
import io.disaggusage.extproc.testkit.Wire;
import static io.disaggusage.extproc.testkit.EngineRequests.TRT_ID;
import static io.disaggusage.extproc.scenario.Flows.ctxExchange;
import static io.disaggusage.extproc.scenario.Flows.genExchange;
import static io.disaggusage.extproc.testkit.EngineRequests.trtRequest;
import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.config.ConfigLoader;
import io.disaggusage.extproc.config.ConfigLoader.Setting;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.stream.ExtProcService;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.testkit.OpenAiClientView.ClientUsage;
import io.disaggusage.extproc.store.RedisContextUsageStore;
import io.disaggusage.extproc.store.RedisServer;
import io.disaggusage.extproc.store.RedisStores;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.EnvoyProfile;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Redis going away and stalling, and an entry taken once, across two replicas (every vector's
 * correction across two Redis replicas is {@link ExchangeSpecificationTest}'s). Two service replicas in one process, each with its own fake Envoy and its own Redis store on one
 * redis-server: the context leg of a request passes replica A, the generation leg replica B, as behind a
 * central Deployment with several replicas. The client must get the corrected usage for either ordering
 * and body kind, and must never notice Redis going away: while it is down traffic passes through
 * unmodified and promptly; once it is back, usage is corrected again without a restart.
 */
@ExchangeSpecification
class RedisReplicasScenarioTest {
  private static final Duration REDIS_TIMEOUT = Duration.ofMillis(50); // the default, well below Envoy's 200 ms
  /** What an exchange may take in this harness beyond one Redis timeout (in-process gRPC, a busy CI host). */
  private static final Duration EXCHANGE_BUDGET = REDIS_TIMEOUT.plus(Duration.ofMillis(900));

  private RedisServer redis;
  private ServiceUnderTest a;
  private ServiceUnderTest b;

  @BeforeEach
  void start() throws Exception {
    redis = RedisServer.start();
    Config config = config(redis.uri(), RedisStores.freshPrefix());
    a = replica(config);
    b = replica(config);
  }

  @AfterEach
  void stop() throws Exception {
    for (AutoCloseable c : new AutoCloseable[] {a, b, redis}) {
      if (c != null) {
        c.close();
      }
    }
  }

  static Config config(String uri, String prefix) throws Exception {
    return config(uri, prefix, REDIS_TIMEOUT);
  }

  /** Two replicas' configuration: the test clusters, a 1.5 s context wait, Redis at {@code uri} under {@code prefix}. */
  static Config config(String uri, String prefix, Duration redisTimeout) throws Exception {
    List<Setting> settings = new ArrayList<>();
    for (String[] kv :
        new String[][] {
          {"classification.context_clusters", ServiceUnderTest.CONTEXT_CLUSTER},
          {"classification.generation_clusters", ServiceUnderTest.GENERATION_CLUSTER},
          {"ordering.context_wait", "1500ms"},
          {"store.type", "redis"},
          {"store.redis_uri", uri},
          {"store.key_prefix", prefix},
          {"store.redis_timeout", redisTimeout.toMillis() + "ms"},
        }) {
      settings.add(new Setting(kv[0], kv[1], "test"));
    }
    return ConfigLoader.load(null, Map.of(), settings);
  }

  /** One replica of a Redis-backed deployment: the service on its own Redis store, behind its own fake Envoy. */
  static ServiceUnderTest replica(Config config) throws Exception {
    return new ServiceUnderTest(
        config,
        ServiceUnderTest.Transport.IN_PROCESS,
        EnvoyProfile.V1_37,
        (c, timer) ->
            RedisStores.openReady(
                new RedisContextUsageStore.Settings(
                    c.store().redisUri(),
                    c.store().redisCluster(),
                    c.store().keyPrefix(),
                    c.store().ttl(),
                    c.store().redisTimeout()),
                timer),
        ExtProcService::new);
  }

  private static final String CTX_USAGE = Wire.usage(128, 1, 9L);
  private static final String GEN_USAGE = Wire.usage(128, 5, 128L);

  private static String genBody(boolean stream) {
    return stream ? Wire.chatStream(GEN_USAGE, "Par", "is") : Wire.chatCompletion("gen", GEN_USAGE);
  }

  private static Exchange.Builder ctx(String id, int scheduleStyle) {
    return ctxExchange(
        trtRequest("context_only", ",\"disagg_request_id\":" + id + ",\"schedule_style\":" + scheduleStyle),
        Wire.trtContextResponse(id, id, CTX_USAGE));
  }

  private static Exchange.Builder gen(String id, int scheduleStyle, boolean stream) {
    return genExchange(
        trtRequest("generation_only", ",\"ctx_request_id\":" + id + ",\"schedule_style\":" + scheduleStyle),
        stream ? "text/event-stream" : "application/json",
        genBody(stream),
        Chunking.fixed(40));
  }

  private static void assertCorrected(ExchangeResult[] r, boolean stream) throws Exception {
    assertClean(r[0]);
    assertClean(r[1]);
    assertThat(r[0].clientResponse().bodyUtf8()).isEqualTo(Wire.trtContextResponse(TRT_ID, TRT_ID, CTX_USAGE));
    String body = r[1].clientResponse().bodyUtf8();
    assertThat(body).isEqualTo(genBody(stream).replace("{\"cached_tokens\":128}", "{\"cached_tokens\":9}"));
    ClientUsage usage = stream ? OpenAiClientView.chatStream(body) : OpenAiClientView.chatCompletion(body);
    assertThat(usage).isEqualTo(new ClientUsage(128, 9L, 5, 133));
    assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("rewritten");
    assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:cached_tokens)%")).isEqualTo("9");
  }

  private void assertNothingLeft() {
    assertThat(((RedisContextUsageStore) a.store).countEntries().join()).isZero();
    assertThat(a.store.waiters() + b.store.waiters()).isZero();
  }

  @Test
  void anEntryIsUsedByOneGenerationOnly() {
    Flows.run(a.envoy, ctx(TRT_ID, 0));
    ExchangeResult first = Flows.run(b.envoy, gen(TRT_ID, 0, false));
    ExchangeResult second = Flows.run(a.envoy, gen(TRT_ID, 0, false));
    assertThat(first.accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("rewritten");
    assertClean(second);
    assertThat(second.clientResponse().bodyUtf8()).isEqualTo(genBody(false));
    assertThat(a.metrics.exchangeCount(Phase.GENERATION, Outcome.PASSTHROUGH_NO_CONTEXT)).isEqualTo(1);
  }

  @Test
  void redisDownPassesTrafficThroughPromptlyAndRecoveryNeedsNoRestart() throws Exception {
    redis.stop();
    RedisStores.awaitState(a.store, false, Duration.ofSeconds(5));
    RedisStores.awaitState(b.store, false, Duration.ofSeconds(5));

    for (boolean stream : new boolean[] {false, true}) {
      String id = stream ? "900" : "901";
      long start = System.nanoTime();
      ExchangeResult c = Flows.run(a.envoy, ctx(id, 0));
      assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(EXCHANGE_BUDGET);
      start = System.nanoTime();
      ExchangeResult g = Flows.run(b.envoy, gen(id, 0, stream));
      assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(EXCHANGE_BUDGET);
      assertClean(c);
      assertClean(g);
      assertThat(c.clientResponse().bodyUtf8()).isEqualTo(Wire.trtContextResponse(id, id, CTX_USAGE));
      assertThat(g.clientResponse().bodyUtf8()).isEqualTo(genBody(stream));
    }
    // Generation-first while down: the wait fails at once instead of running into the deadline.
    long start = System.nanoTime();
    ExchangeResult[] r = Flows.generationFirst(a.envoy, ctx("902", 1), b.envoy, gen("902", 1, true));
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(EXCHANGE_BUDGET.multipliedBy(2));
    assertClean(r[0]);
    assertClean(r[1]);
    assertThat(r[1].clientResponse().bodyUtf8()).isEqualTo(genBody(true));

    assertThat(a.metrics.storeErrorCount(Metrics.StoreOperation.PUT)).isEqualTo(3);
    // Each generation looked up once at its response headers; the generation-first one also waited.
    assertThat(b.metrics.storeErrorCount(Metrics.StoreOperation.TAKE)).isEqualTo(3);
    assertThat(b.metrics.storeErrorCount(Metrics.StoreOperation.AWAIT)).isEqualTo(1);
    assertThat(b.metrics.exchangeCount(Phase.GENERATION, Outcome.ERROR)).isEqualTo(3);

    redis.restart();
    RedisStores.awaitReady(a.store, Duration.ofSeconds(10));
    RedisStores.awaitReady(b.store, Duration.ofSeconds(10));
    assertCorrected(
        new ExchangeResult[] {Flows.run(a.envoy, ctx(TRT_ID, 0)), Flows.run(b.envoy, gen(TRT_ID, 0, true))}, true);
    assertCorrected(Flows.generationFirst(a.envoy, ctx(TRT_ID, 1), b.envoy, gen(TRT_ID, 1, false)), false);
    assertNothingLeft();
  }

  @Test
  void aStalledRedisCostsAnExchangeAtMostTheTimeout() throws Exception {
    io.lettuce.core.RedisClient client = io.lettuce.core.RedisClient.create(redis.uri());
    try (var connection = client.connect()) {
      connection.sync().clientPause(3_000);
    } finally {
      client.shutdown();
    }
    long start = System.nanoTime();
    ExchangeResult c = Flows.run(a.envoy, ctx("903", 0));
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(EXCHANGE_BUDGET);
    start = System.nanoTime();
    ExchangeResult g = Flows.run(b.envoy, gen("903", 0, false));
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(EXCHANGE_BUDGET);
    assertClean(c);
    assertClean(g);
    assertThat(g.clientResponse().bodyUtf8()).isEqualTo(genBody(false));
    assertThat(a.metrics.storeErrorCount(Metrics.StoreOperation.PUT)).isEqualTo(1);
    assertThat(b.metrics.storeErrorCount(Metrics.StoreOperation.TAKE)).isEqualTo(1);
  }
}
