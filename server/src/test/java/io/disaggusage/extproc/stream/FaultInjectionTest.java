package io.disaggusage.extproc.stream;

import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static io.disaggusage.extproc.scenario.Flows.ctx;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.scenario.Flows;
import io.disaggusage.extproc.testkit.ScenarioVectors;
import io.disaggusage.extproc.testkit.ScenarioVectors.Leg;
import io.disaggusage.extproc.testkit.ScenarioVectors.Vector;
import io.disaggusage.extproc.scenario.ServiceUnderTest;
import io.disaggusage.extproc.testkit.Wire;
import io.disaggusage.extproc.store.FaultyStore;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.EnvoyProfile;
import io.disaggusage.extproc.emulator.envoy.EnvoyStats;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeHandle;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Faults around the service, injected through the fake Envoy (behaviour.md §6, reliability.md): the
 * service's stream reset mid-body, Envoy's message timeout expiring, Envoy's duplicate end_of_stream,
 * a client cancelling, a context response that never comes, a store that is down, slow, throwing,
 * recovering or restarted, and a gRPC message above the size limit. After each: the client saw its
 * bytes (corrected, or untouched — never broken), what happened was counted, no stream is left open,
 * no waiter is left, and the store is empty once its TTL has passed.
 */
class FaultInjectionTest {
  static final String PATH = "/v1/chat/completions";
  static final Duration WAIT = Duration.ofMillis(300);
  static final Duration TTL = Duration.ofMillis(800);
  static final String GEN_REQ = "{\"kv_transfer_params\":{\"do_remote_prefill\":true}}";

  static Config config(int maxInboundMessageBytes) {
    Config d = ServiceUnderTest.testConfig(WAIT);
    Config.Grpc g = d.grpc();
    return new Config(
        new Config.Grpc(g.port(), maxInboundMessageBytes, g.listen(), g.keepaliveTime(), g.keepaliveTimeout(),
            g.permitKeepaliveTime(), g.maxConcurrentStreams(), g.maxConnectionIdle(), g.envoyMessageTimeout(), g.tls()),
        d.admin(), d.classification(), d.ordering(),
        new Config.Store(d.store().type(), TTL, d.store().redisUri(), d.store().maxEntries(), d.store().keyPrefix(), d.store().redisTimeout(), d.store().redisCluster()),
        d.metadata(), d.limits(), d.metrics(), d.logging(), d.shutdown(), d.streaming(), d.edgeGuard());
  }

  /** The service with a switchable store in front of the fixture's memory store. */
  static ServiceUnderTest withFaultyStore(AtomicReference<FaultyStore> holder, ServiceUnderTest.Transport transport, int maxInbound)
      throws Exception {
    return withFaultyStore(holder, config(maxInbound), transport);
  }

  static ServiceUnderTest withFaultyStore(AtomicReference<FaultyStore> holder, Config config) throws Exception {
    return withFaultyStore(holder, config, ServiceUnderTest.Transport.IN_PROCESS);
  }

  private static ServiceUnderTest withFaultyStore(
      AtomicReference<FaultyStore> holder, Config config, ServiceUnderTest.Transport transport) throws Exception {
    return new ServiceUnderTest(config, transport, EnvoyProfile.V1_37, (c, store, metrics, timer) -> {
      FaultyStore faulty = new FaultyStore((io.disaggusage.extproc.store.MemoryContextUsageStore) store, timer);
      holder.set(faulty);
      return new ExtProcService(c, faulty, metrics, timer);
    });
  }

  static ServiceUnderTest withFaultyStore(AtomicReference<FaultyStore> holder) throws Exception {
    return withFaultyStore(holder, ServiceUnderTest.Transport.IN_PROCESS, 64 * 1024 * 1024);
  }

  /**
   * Nothing left behind: once every stream is over on the service's side, no stream is counted open and
   * no waiter is left; and the store is empty once its TTL has passed.
   */
  static void assertNoLeak(ServiceUnderTest s) throws InterruptedException {
    s.awaitStreamsEnded();
    assertThat(s.metrics.activeStreams()).as("active streams").isZero();
    assertThat(s.store.waiters()).as("waiters").isZero();
    s.passStoreTtl();
    assertThat(s.store.size()).as("store drained after TTL").isZero();
  }

  static Exchange.Builder gen(String key, String contentType, String body) {
    return Exchange.post(PATH, GEN_REQ)
        .requestHeader("x-request-id", key)
        .responseHeader("content-type", contentType)
        .responseBody(body)
        .responseContentLength();
  }

  // ---------------------------------------------------------------------------------------------
  // The service's own stream goes away mid-body

  /**
   * Resets the second stream (the generation exchange; the first is its context exchange) as a crash
   * or a dropped connection does, when its n-th response body message arrives.
   */
  static final class ResettingService extends ExternalProcessorGrpc.ExternalProcessorImplBase {
    private final ExtProcService delegate;
    private final int resetAt;
    private final java.util.concurrent.atomic.AtomicInteger streams = new java.util.concurrent.atomic.AtomicInteger();

    ResettingService(ExtProcService delegate, int resetAt) {
      this.delegate = delegate;
      this.resetAt = resetAt;
    }

    @Override
    public StreamObserver<ProcessingRequest> process(StreamObserver<ProcessingResponse> out) {
      StreamObserver<ProcessingRequest> in = delegate.process(out);
      if (streams.incrementAndGet() != 2) {
        return in;
      }
      return new StreamObserver<>() {
        int bodies;
        boolean dead;

        @Override
        public void onNext(ProcessingRequest r) {
          if (dead) {
            return;
          }
          if (r.hasResponseBody() && ++bodies == resetAt) {
            dead = true;
            in.onError(Status.CANCELLED.asException()); // what gRPC tells the handler on a reset
            out.onError(Status.UNAVAILABLE.withDescription("replica gone").asException());
            return;
          }
          in.onNext(r);
        }

        @Override
        public void onError(Throwable t) {
          if (!dead) {
            in.onError(t);
          }
        }

        @Override
        public void onCompleted() {
          if (!dead) {
            in.onCompleted();
          }
        }
      };
    }
  }

  static List<String> events(String stream) {
    List<String> out = new ArrayList<>();
    int at = 0;
    int end;
    while ((end = stream.indexOf("\n\n", at)) >= 0) {
      out.add(stream.substring(at, end + 2));
      at = end + 2;
    }
    return out;
  }

  @Test
  void serverResetMidBodyDeliversEveryByteExactlyOnce() throws Exception {
    Vector v = ScenarioVectors.all().stream().filter(x -> x.name().equals("trtContextFirstStream")).findFirst().orElseThrow();
    String original = v.generation().responseUtf8();
    String corrected = new String(v.expectedGeneration(), StandardCharsets.UTF_8);
    List<String> in = events(original);
    List<String> out = events(corrected);
    int[] cuts = new int[in.size() - 1];
    for (int i = 0, at = 0; i < cuts.length; i++) {
      at += in.get(i).length();
      cuts[i] = at;
    }
    for (int resetAt = 1; resetAt <= in.size(); resetAt++) {
      int n = resetAt;
      try (ServiceUnderTest s =
          new ServiceUnderTest(config(64 * 1024 * 1024), ServiceUnderTest.Transport.IN_PROCESS, EnvoyProfile.V1_37,
              (config, store, metrics, timer) -> new ResettingService(new ExtProcService(config, store, metrics, timer), n))) {
        Flows.run(s.envoy, exchange(v.context()));
        ExchangeResult g = Flows.run(s.envoy, exchange(v.generation()).responseChunking(Chunking.at(cuts)));
        // Events answered before the reset went out as the service made them; the rest unmodified.
        String expected = String.join("", out.subList(0, n - 1)) + String.join("", in.subList(n - 1, in.size()));
        assertThat(g.clientResponse().bodyUtf8()).as("reset at body message %d", n).isEqualTo(expected);
        assertThat(g.clientResponse().reset()).isFalse();
        assertThat(g.clientResponse().localReply()).isEmpty();
        assertThat(g.streamEnd()).as("stats %s", g.stats()).isEqualTo(ExchangeResult.StreamEnd.SERVER_FAILED);
        assertNoLeak(s);
      }
    }
  }

  static Exchange.Builder exchange(Leg leg) {
    Exchange.Builder b = Exchange.post(leg.path(), new String(leg.requestBody(), StandardCharsets.UTF_8))
        .responseHeader("content-type", leg.contentType())
        .responseBody(leg.responseBody());
    leg.requestHeaders().forEach(b::requestHeader);
    if (leg.cluster() != null) {
      b.requestAttribute("xds.cluster_name", leg.cluster());
    }
    return b;
  }

  // ---------------------------------------------------------------------------------------------
  // Envoy's side: message timeout, duplicate end_of_stream, client cancel

  @Test
  void messageTimeoutExpiryLetsTheExchangeThroughUnmodified() throws Exception {
    AtomicReference<FaultyStore> store = new AtomicReference<>();
    try (ServiceUnderTest s = withFaultyStore(store)) {
      String ctxBody = Wire.chatCompletion("t", Wire.usage(50, 1, 10L));
      assertClean(Flows.run(s.envoy, ctx("t", ctxBody)));
      // The lookup at the generation's response headers answers only after the fake Envoy's message
      // timeout (ServiceUnderTest.TEST_MESSAGE_TIMEOUT_MILLIS) has expired.
      store.get().mode(FaultyStore.Mode.HELD);
      String genBody = Wire.chatCompletion("t", Wire.usage(50, 4, 50L));
      ExchangeResult g = Flows.run(s.envoy, gen("t", "application/json", genBody));
      assertThat(g.stats().get(EnvoyStats.MESSAGE_TIMEOUTS)).isEqualTo(1);
      assertThat(g.stats().get(EnvoyStats.FAILURE_MODE_ALLOWED)).isEqualTo(1);
      assertThat(g.clientResponse().bodyUtf8()).isEqualTo(genBody);
      assertThat(g.clientResponse().reset()).isFalse();
      assertThat(g.clientResponse().localReply()).isEmpty();
      // The stream ended as a client's hang-up ends it, but with the headers reply owed for Envoy's timeout.
      s.awaitStreamsEnded();
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.ENVOY_GAVE_UP)).isEqualTo(1);
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.RESET)).isZero();
      store.get().mode(FaultyStore.Mode.UP);
      // The late lookup lands on a closed stream: nothing happens.
      assertThat(store.get().release()).as("lookups held").isEqualTo(1);
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.ENVOY_GAVE_UP)).as("counted once").isEqualTo(1);
      assertNoLeak(s);
    }
  }

  @Test
  void aContextWriteOutlastingEnvoysTimerCountsEnvoyGaveUpWhenItLands() throws Exception {
    AtomicReference<FaultyStore> store = new AtomicReference<>();
    try (ServiceUnderTest s = withFaultyStore(store)) {
      String ctxBody = Wire.chatCompletion("w", Wire.usage(50, 1, 10L));
      store.get().mode(FaultyStore.Mode.HELD);
      ExchangeResult c = Flows.run(s.envoy, ctx("w", ctxBody));
      assertThat(c.stats().get(EnvoyStats.MESSAGE_TIMEOUTS)).as("Envoy gave up").isEqualTo(1);
      assertThat(c.clientResponse().bodyUtf8()).isEqualTo(ctxBody);
      s.awaitStreamsEnded();
      assertThat(s.metrics.exchangeCount(Phase.CONTEXT, Outcome.ENVOY_GAVE_UP)).as("counted when the write lands").isZero();
      store.get().mode(FaultyStore.Mode.UP);
      assertThat(store.get().release()).as("writes held").isEqualTo(1);
      assertThat(s.metrics.exchangeCount(Phase.CONTEXT, Outcome.ENVOY_GAVE_UP)).isEqualTo(1);
      assertThat(s.metrics.exchangeCount(Phase.CONTEXT, Outcome.STORED)).isZero();
      // The usage landed all the same: the generation call that follows is corrected.
      ExchangeResult g = Flows.run(s.envoy, gen("w", "application/json", Wire.chatCompletion("w", Wire.usage(50, 4, 50L))));
      assertClean(g);
      assertThat(g.accessLog("%DYNAMIC_METADATA(disagg_usage:cached_tokens)%")).isEqualTo("10");
      assertNoLeak(s);
    }
  }

  @Test
  void duplicateEndOfStreamMessagesAreIgnored() throws Exception {
    try (ServiceUnderTest s = new ServiceUnderTest(config(64 * 1024 * 1024))) {
      String stream = Wire.chatStream(Wire.usage(50, 4, 50L), "a", "b");
      ExchangeResult c = Flows.run(s.envoy, ctx("d", Wire.chatCompletion("d", Wire.usage(50, 1, 10L))).duplicateFinalBodyMessage());
      ExchangeResult g = Flows.run(s.envoy, gen("d", "text/event-stream", stream).responseChunking(Chunking.fixed(40)).duplicateFinalBodyMessage());
      assertClean(c);
      assertClean(g);
      assertThat(g.clientResponse().bodyUtf8()).isEqualTo(stream.replace("{\"cached_tokens\":50}", "{\"cached_tokens\":10}"));
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.REWRITTEN)).isEqualTo(1);
      assertNoLeak(s);
    }
  }

  /**
   * Also after Envoy's plain message timeout: the generation holds its last reply with Envoy's timer
   * extended, so a client hanging up then did not meet a give-up of Envoy's.
   */
  @ParameterizedTest(name = "past Envoy's plain message timeout: {0}")
  @ValueSource(booleans = {false, true})
  void clientCancelWhileWaitingForContextWithdrawsTheWaiter(boolean pastTheMessageTimeout) throws Exception {
    AtomicReference<FaultyStore> store = new AtomicReference<>();
    try (ServiceUnderTest s = withFaultyStore(store, ServiceUnderTest.testConfig(Duration.ofMillis(2500)))) {
      String stream = Wire.chatStream(Wire.usage(50, 4, 50L), "a");
      ExchangeHandle g =
          s.envoy.start(
              gen("c", "text/event-stream", stream)
                  .requestHeader("x-disagg-order", "concurrent")
                  .gateResponseBody()
                  .build());
      g.awaitResponseHeadersForwarded();
      g.releaseResponseBody();
      store.get().firstAwait().get(5, TimeUnit.SECONDS);
      assertThat(s.store.waiters()).as("the generation exchange waits").isEqualTo(1);
      if (pastTheMessageTimeout) {
        Thread.sleep(s.config.grpc().envoyMessageTimeout().toMillis() + 300);
      }
      ExchangeResult r = g.resetDownstream().awaitResult();
      assertThat(r.clientResponse().reset()).isTrue();
      assertThat(r.stats().get(EnvoyStats.MESSAGE_TIMEOUTS)).isZero();
      if (pastTheMessageTimeout) {
        assertThat(r.stats().get(EnvoyStats.OVERRIDE_MESSAGE_TIMEOUT_RECEIVED)).as("the timer was extended").isEqualTo(1);
      }
      s.awaitStreamsEnded();
      assertThat(s.store.waiters()).as("waiter withdrawn").isZero();
      assertThat(s.metrics.activeStreams()).as("stream closed").isZero();
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.RESET)).as("a hang-up, not Envoy's timeout").isEqualTo(1);
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.ENVOY_GAVE_UP)).isZero();
      // The context response that comes later is stored and expires unclaimed.
      assertClean(Flows.run(s.envoy, ctx("c", Wire.chatCompletion("c", Wire.usage(50, 1, 10L)))));
      assertThat(s.store.size()).isEqualTo(1);
    }
  }

  @Test
  void clientCancelMidContextResponseStoresNothing() throws Exception {
    try (ServiceUnderTest s = new ServiceUnderTest(config(64 * 1024 * 1024))) {
      ExchangeResult c =
          s.envoy.execute(
              ctx("x", Wire.chatCompletion("x", Wire.usage(50, 1, 10L)))
                  .responseChunking(Chunking.fixed(20))
                  .downstreamResetAfterResponseChunks(2)
                  .build());
      assertThat(c.clientResponse().reset()).isTrue();
      s.awaitStreamsEnded();
      assertThat(s.metrics.activeStreams()).as("stream closed").isZero();
      assertThat(s.store.size()).isZero();
    }
  }

  @Test
  void contextThatNeverComesTimesOutAndPassesTheWorkersUsage() throws Exception {
    try (ServiceUnderTest s = new ServiceUnderTest(config(64 * 1024 * 1024))) {
      String stream = Wire.chatStream(Wire.usage(50, 4, 50L), "a", "b");
      String json = Wire.chatCompletion("n", Wire.usage(50, 4, 50L));
      ExchangeResult sse = Flows.run(s.envoy, gen("never-1", "text/event-stream", stream).requestHeader("x-disagg-order", "concurrent"));
      ExchangeResult body = Flows.run(s.envoy, gen("never-2", "application/json", json).requestHeader("x-disagg-order", "concurrent"));
      for (ExchangeResult r : List.of(sse, body)) {
        assertClean(r);
        assertThat(r.accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("context_timeout");
        assertThat(r.accessLog("%DYNAMIC_METADATA(disagg_usage:cached_tokens)%")).isEqualTo("50");
      }
      assertThat(sse.clientResponse().bodyUtf8()).isEqualTo(stream);
      assertThat(body.clientResponse().bodyUtf8()).isEqualTo(json);
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.CONTEXT_TIMEOUT)).isEqualTo(2);
      assertNoLeak(s);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // The store (Redis down, slow, restarted) — a wrapper here; real-Redis faults belong to the Redis tests

  void pair(ServiceUnderTest s, String key, boolean corrected, Outcome ctxOutcome, Outcome genOutcome) {
    String ctxBody = Wire.chatCompletion(key, Wire.usage(50, 1, 10L));
    String genBody = Wire.chatCompletion(key, Wire.usage(50, 4, 50L));
    ExchangeResult c = Flows.run(s.envoy, ctx(key, ctxBody).responseChunking(Chunking.fixed(17)));
    ExchangeResult g = Flows.run(s.envoy, gen(key, "application/json", genBody));
    assertClean(c);
    assertClean(g);
    assertThat(c.clientResponse().bodyUtf8()).isEqualTo(ctxBody);
    assertThat(g.clientResponse().bodyUtf8())
        .isEqualTo(corrected ? genBody.replace("{\"cached_tokens\":50}", "{\"cached_tokens\":10}") : genBody);
    // A store call that throws instead of failing its future is an internal error: the exchange is
    // let through without metadata; one that fails its future still tells Envoy the outcome.
    assertThat(g.accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isIn(genOutcome.label(), genOutcome == Outcome.ERROR ? "-" : genOutcome.label());
    assertThat(s.metrics.exchangeCount(Phase.GENERATION, genOutcome)).isPositive();
    assertThat(s.metrics.exchangeCount(Phase.CONTEXT, ctxOutcome)).isPositive();
  }

  @Test
  void storeDownThrowingRecoveringAndRestarted() throws Exception {
    AtomicReference<FaultyStore> store = new AtomicReference<>();
    try (ServiceUnderTest s = withFaultyStore(store)) {
      store.get().mode(FaultyStore.Mode.DOWN);
      assertThat(store.get().isReady()).isFalse();
      pair(s, "down", false, Outcome.ERROR, Outcome.ERROR);
      assertThat(s.metrics.storeErrorCount(Metrics.StoreOperation.PUT)).isEqualTo(1);
      assertThat(s.metrics.storeErrorCount(Metrics.StoreOperation.TAKE)).isEqualTo(1);

      store.get().mode(FaultyStore.Mode.THROWING);
      pair(s, "throwing", false, Outcome.ERROR, Outcome.ERROR);

      store.get().mode(FaultyStore.Mode.UP); // recovered: the very next pair is corrected
      pair(s, "up", true, Outcome.STORED, Outcome.REWRITTEN);

      // Restarted between the two legs (no persistence): a context-first miss, untouched.
      String ctxBody = Wire.chatCompletion("r", Wire.usage(50, 1, 10L));
      assertClean(Flows.run(s.envoy, ctx("r", ctxBody)));
      store.get().restart();
      String genBody = Wire.chatCompletion("r", Wire.usage(50, 4, 50L));
      ExchangeResult g = Flows.run(s.envoy, gen("r", "application/json", genBody));
      assertClean(g);
      assertThat(g.clientResponse().bodyUtf8()).isEqualTo(genBody);
      assertThat(g.accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("passthrough_no_context");
      assertThat(store.get().failed()).isGreaterThanOrEqualTo(4);
      assertNoLeak(s);
    }
  }

  @Test
  void slowStoreWithinEnvoysTimerStillCorrects() throws Exception {
    AtomicReference<FaultyStore> store = new AtomicReference<>();
    try (ServiceUnderTest s = withFaultyStore(store)) {
      store.get().mode(FaultyStore.Mode.SLOW).delay(Duration.ofMillis(80));
      pair(s, "slow", true, Outcome.STORED, Outcome.REWRITTEN);
      // Generation first with a slow store: the wait still ends in a correction.
      String stream = Wire.chatStream(Wire.usage(50, 4, 50L), "a");
      ExchangeResult[] r =
          Flows.generationFirst(
              s.envoy,
              ctx("slow-g", Wire.chatCompletion("g", Wire.usage(50, 1, 10L))),
              gen("slow-g", "text/event-stream", stream).requestHeader("x-disagg-order", "concurrent"));
      assertClean(r[1]);
      assertThat(r[1].clientResponse().bodyUtf8()).isEqualTo(stream.replace("{\"cached_tokens\":50}", "{\"cached_tokens\":10}"));
      store.get().mode(FaultyStore.Mode.UP);
      assertNoLeak(s);
    }
  }

  @Test
  void storeFailingWhileAGenerationWaitsLetsItThrough() throws Exception {
    AtomicReference<FaultyStore> store = new AtomicReference<>();
    try (ServiceUnderTest s = withFaultyStore(store)) {
      store.get().mode(FaultyStore.Mode.DOWN);
      String stream = Wire.chatStream(Wire.usage(50, 4, 50L), "a");
      ExchangeResult g = Flows.run(s.envoy, gen("w", "text/event-stream", stream).requestHeader("x-disagg-order", "concurrent"));
      assertClean(g);
      assertThat(g.clientResponse().bodyUtf8()).isEqualTo(stream);
      assertThat(g.accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("error");
      assertThat(s.metrics.storeErrorCount(Metrics.StoreOperation.AWAIT)).isEqualTo(1);
      store.get().mode(FaultyStore.Mode.UP);
      assertNoLeak(s);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // gRPC limits

  @Test
  void messageAboveTheGrpcSizeLimitFailsOpenUnmodified() throws Exception {
    AtomicReference<FaultyStore> store = new AtomicReference<>();
    try (ServiceUnderTest s = withFaultyStore(store, ServiceUnderTest.Transport.NETTY_LOOPBACK, 4096)) {
      // Warm the Netty transport up first: a cold one can exceed Envoy's 200 ms message timer.
      for (int i = 0; i < 50; i++) {
        ExchangeResult warm = Flows.run(s.envoy, ctx("warm", Wire.chatCompletion("warm", Wire.usage(5, 1, 1L))));
        if (warm.stats().get(EnvoyStats.MESSAGE_TIMEOUTS) == 0) {
          break;
        }
      }
      String ctxBody = Wire.chatCompletion("big", Wire.usage(50, 1, 10L));
      assertClean(Flows.run(s.envoy, ctx("big", ctxBody)));
      String genBody = "{\"pad\":\"" + "p".repeat(20_000) + "\",\"usage\":" + Wire.usage(50, 4, 50L) + "}";
      ExchangeResult g = Flows.run(s.envoy, gen("big", "application/json", genBody).responseChunking(Chunking.fixed(16_000)));
      assertThat(g.clientResponse().bodyUtf8()).isEqualTo(genBody);
      assertThat(g.clientResponse().reset()).isFalse();
      assertThat(g.clientResponse().localReply()).isEmpty();
      assertThat(g.stats().get(EnvoyStats.FAILURE_MODE_ALLOWED)).isEqualTo(1);
      assertNoLeak(s);
    }
  }
}
