package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.OpenAiClientView;
import io.disaggusage.extproc.testkit.Wire;
import static io.disaggusage.extproc.testkit.EngineRequests.PATH;
import static io.disaggusage.extproc.scenario.Flows.genExchange;
import static io.disaggusage.extproc.testkit.EngineRequests.vllmDecode;
import static io.disaggusage.extproc.testkit.EngineRequests.vllmPrefill;
import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.stream.ExtProcService;
import io.disaggusage.extproc.testkit.OpenAiClientView.ClientUsage;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.EnvoyProfile;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeHandle;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.store.FaultyStore;
import io.disaggusage.extproc.store.RedisContextUsageStore;
import io.disaggusage.extproc.store.RedisServer;
import io.disaggusage.extproc.store.RedisStores;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * The context leg's store write against the orchestrator's next call (issue 14). A JSON context
 * response with a content-length reaches Envoy as a data chunk followed by an end-of-stream message of
 * its own; the client has the whole body as soon as the data chunk is answered and starts the
 * generation call, while Envoy still waits for the reply to the end. Writes here land late, as on a
 * loaded host: the generation lookup must still find the context usage, in one replica's memory store
 * and across two replicas sharing Redis.
 */
@ExchangeSpecification
class ContextWriteRaceScenarioTest {
  private static final Duration WRITE_DELAY = Duration.ofMillis(300);
  private static final String CTX_USAGE = Wire.usage(100, 1, 32L);
  private static final String GEN_USAGE = Wire.usage(100, 12, 99L);
  private static final String GEN_BODY = Wire.chatCompletion("d", GEN_USAGE);
  /** What a real HTTP/1.1 upstream's codec delivers: the body, then its end as a message of its own. */
  private static final Chunking DATA_THEN_END = Chunking.whole().withEmptyFinalChunk();

  private static Exchange.Builder ctx(String id) {
    return Exchange.post(PATH, vllmPrefill())
        .requestHeader("x-request-id", id)
        .responseHeader("content-type", "application/json")
        .responseBody(Wire.chatCompletion("p", CTX_USAGE))
        .responseContentLength()
        .responseChunking(DATA_THEN_END);
  }

  private static Exchange.Builder gen(String id) {
    return genExchange(vllmDecode(false), "application/json", GEN_BODY, DATA_THEN_END)
        .requestHeader("x-request-id", id);
  }

  private static ServiceUnderTest replica(Config config, ServiceUnderTest.StoreFactory stores) throws Exception {
    return new ServiceUnderTest(
        config,
        ServiceUnderTest.Transport.IN_PROCESS,
        EnvoyProfile.V1_37,
        (c, timer) -> new FaultyStore(stores.open(c, timer), timer).mode(FaultyStore.Mode.LATE_WRITES).delay(WRITE_DELAY),
        ExtProcService::new);
  }

  private static ServiceUnderTest.StoreFactory redis() {
    return (c, timer) ->
        RedisStores.openReady(
            new RedisContextUsageStore.Settings(
                c.store().redisUri(), false, c.store().keyPrefix(), c.store().ttl(), c.store().redisTimeout()),
            timer);
  }

  private static void assertCorrected(ExchangeResult[] r) throws Exception {
    assertClean(r[0]);
    assertClean(r[1]);
    assertThat(r[0].clientResponse().bodyUtf8()).isEqualTo(Wire.chatCompletion("p", CTX_USAGE));
    String body = r[1].clientResponse().bodyUtf8();
    assertThat(body).isEqualTo(GEN_BODY.replace("{\"cached_tokens\":99}", "{\"cached_tokens\":32}"));
    assertThat(OpenAiClientView.chatCompletion(body)).isEqualTo(new ClientUsage(100, 32L, 12, 112));
    assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("rewritten");
  }

  @Test
  void theGenerationCallFindsALateWriteInTheMemoryStore() throws Exception {
    try (ServiceUnderTest s = replica(ServiceUnderTest.testConfig(), ServiceUnderTest.MEMORY_STORE)) {
      ExchangeResult[] r = Flows.contextFirst(s.envoy, ctx("race-1"), gen("race-1"));
      assertCorrected(r);
      assertThat(s.metrics.exchangeCount(Phase.CONTEXT, Outcome.STORED)).isEqualTo(1);
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.REWRITTEN)).isEqualTo(1);
    }
  }

  @Test
  void theGenerationCallOnAnotherReplicaFindsALateWriteInRedis() throws Exception {
    RedisServer.requireBinary();
    try (RedisServer server = RedisServer.start()) {
      Config config = RedisReplicasScenarioTest.config(server.uri(), RedisStores.freshPrefix());
      try (ServiceUnderTest a = replica(config, redis());
          ServiceUnderTest b = replica(config, redis())) {
        ExchangeResult[] r = Flows.contextFirst(a.envoy, ctx("race-2"), b.envoy, gen("race-2"));
        assertCorrected(r);
        assertThat(a.metrics.exchangeCount(Phase.CONTEXT, Outcome.STORED)).isEqualTo(1);
        assertThat(b.metrics.exchangeCount(Phase.GENERATION, Outcome.REWRITTEN)).isEqualTo(1);
      }
    }
  }

  @Test
  void aWriteThatLandsAfterTheClientLeftIsStillCountedStored() throws Exception {
    try (ServiceUnderTest s = replica(ServiceUnderTest.testConfig(), ServiceUnderTest.MEMORY_STORE)) {
      FaultyStore store = ((FaultyStore) s.store).mode(FaultyStore.Mode.HELD); // lands when released below
      ExchangeHandle h = s.envoy.start(ctx("race-3").responseChunking(Chunking.whole()).gateResponseBody().build());
      h.awaitResponseHeadersForwarded();
      h.releaseResponseBody();
      store.firstPut().get(5, java.util.concurrent.TimeUnit.SECONDS);
      h.resetDownstream();
      assertThat(h.awaitResult().clientResponse().reset()).isTrue();
      assertThat(s.metrics.exchangeCount(Phase.CONTEXT, Outcome.STORED)).as("before the write landed").isZero();
      assertThat(store.release()).as("writes held").isEqualTo(1);
      // The landed write is counted on the stream's side once its completion reaches it, which may be a
      // moment after release() returns.
      long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(5);
      while (s.metrics.exchangeCount(Phase.CONTEXT, Outcome.STORED) == 0 && System.nanoTime() < deadline) {
        Thread.sleep(5);
      }
      assertThat(s.metrics.exchangeCount(Phase.CONTEXT, Outcome.STORED)).isEqualTo(1);
      assertThat(s.metrics.exchangeCount(Phase.CONTEXT, Outcome.ENVOY_GAVE_UP))
          .as("the client left before Envoy's timer ran out (FaultInjectionTest: after it)")
          .isZero();
      assertThat(s.store.size()).isEqualTo(1);
    }
  }
}
