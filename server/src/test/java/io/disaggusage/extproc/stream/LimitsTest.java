package io.disaggusage.extproc.stream;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.driver.EnvoyStream;
import io.disaggusage.extproc.scenario.DirectEnvoy;
import io.disaggusage.extproc.scenario.ServiceUnderTest;
import io.disaggusage.extproc.testkit.Wire;
import io.disaggusage.extproc.store.MemoryContextUsageStore;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Every cap (behaviour.md "Limits", reliability.md): over it the traffic passes through untouched, the
 * event is counted, and what the service holds stays bounded — so neither a flood of streams nor a
 * hostile body can make it run out of memory.
 */
class LimitsTest {
  static final String PATH = "/v1/chat/completions";
  static final String CTX_REQ = "{\"kv_transfer_params\":{\"do_remote_decode\":true}}";
  static final String GEN_REQ = "{\"kv_transfer_params\":{\"do_remote_prefill\":true}}";

  MemoryContextUsageStore store;
  Metrics metrics;
  DirectEnvoy envoy;

  void start(int maxBody, int maxEvent, int maxKey, long maxEntries, int maxWaiters, Duration wait) {
    Config d = ServiceUnderTest.testConfig(wait);
    Config config =
        new Config(d.grpc(), d.admin(), d.classification(), d.ordering(),
            new Config.Store(d.store().type(), d.store().ttl(), d.store().redisUri(), maxEntries,
                d.store().keyPrefix(), d.store().redisTimeout(), d.store().redisCluster()),
            d.metadata(), new Config.Limits(maxBody, maxEvent, d.limits().maxUsageBytes(), maxKey, maxWaiters),
            d.metrics(), d.logging(), d.shutdown(), d.streaming(), d.edgeGuard());
    store = new MemoryContextUsageStore(config.store().ttl(), maxEntries, ExchangeStreamFuzzTest.TIMER);
    metrics = Metrics.standalone();
    envoy = new DirectEnvoy(new ExtProcService(config, store, metrics, ExchangeStreamFuzzTest.TIMER));
  }

  void start() {
    Config d = Config.defaults();
    start(d.limits().maxBodyBytes(), d.limits().maxEventBytes(), d.limits().maxKeyBytes(), d.store().maxEntries(),
        d.limits().maxWaiters(), Duration.ofSeconds(10));
  }

  @AfterEach
  void stop() {
    if (store != null) {
      store.close();
    }
  }

  static Map<String, String> headers(String... extra) {
    Map<String, String> h = new LinkedHashMap<>();
    h.put(":method", "POST");
    h.put(":path", PATH);
    h.put("content-type", "application/json");
    for (int i = 0; i < extra.length; i += 2) {
      h.put(extra[i], extra[i + 1]);
    }
    return h;
  }

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  EnvoyStream exchange(String requestBody, Map<String, String> headers, String contentType) {
    return envoy.open()
        .requestHeaders(headers, null, false)
        .requestBody(List.of(utf8(requestBody)))
        .responseHeaders(Map.of(":status", "200", "content-type", contentType), false);
  }

  void context(String key, String body) {
    EnvoyStream c = exchange(CTX_REQ, headers("x-request-id", key), "application/json");
    c.responseBody(List.of(utf8(body))).complete();
    assertThat(c.clientBodyUtf8()).isEqualTo(body);
  }

  @Test
  void concurrentWaitersAreCappedAndTheRestPassThroughCounted() {
    start(1 << 24, 1 << 20, 256, 1000, 3, Duration.ofSeconds(10));
    String stream = Wire.chatStream(Wire.usage(50, 4, 50L), "a");
    List<EnvoyStream> gens = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      EnvoyStream g = exchange(GEN_REQ, headers("x-request-id", "w" + i, "x-disagg-order", "concurrent"), "text/event-stream");
      g.responseBody(List.of(utf8(stream)));
      gens.add(g);
    }
    assertThat(store.waiters()).isEqualTo(3);
    assertThat(metrics.waitRefusedCount()).isEqualTo(2);
    for (int i = 3; i < 5; i++) {
      EnvoyStream refused = gens.get(i);
      assertThat(refused.owed()).isZero();
      assertThat(refused.clientBodyUtf8()).isEqualTo(stream);
      assertThat(refused.metadata("disagg_usage", "outcome")).isEqualTo("context_timeout");
      refused.complete();
    }
    for (int i = 0; i < 3; i++) {
      assertThat(gens.get(i).owed()).isEqualTo(1); // the last reply waits for the context
      context("w" + i, Wire.chatCompletion("c", Wire.usage(50, 1, 10L)));
      assertThat(gens.get(i).owed()).isZero();
      assertThat(gens.get(i).clientBodyUtf8()).isEqualTo(stream.replace("{\"cached_tokens\":50}", "{\"cached_tokens\":10}"));
      gens.get(i).complete();
    }
    assertThat(store.waiters()).isZero();
    assertThat(metrics.exchangeCount(Phase.GENERATION, Outcome.CONTEXT_TIMEOUT)).isEqualTo(2);
    assertThat(metrics.exchangeCount(Phase.GENERATION, Outcome.REWRITTEN)).isEqualTo(3);
    // Every permit came back: three exchanges can wait again (cancelled ones included).
    for (int i = 0; i < 3; i++) {
      EnvoyStream g = exchange(GEN_REQ, headers("x-request-id", "again" + i, "x-disagg-order", "concurrent"), "text/event-stream");
      g.responseBody(List.of(utf8(stream)));
      assertThat(g.owed()).isEqualTo(1);
      g.cancel();
    }
    assertThat(metrics.waitRefusedCount()).isEqualTo(2);
    assertThat(store.waiters()).isZero();
    assertThat(metrics.activeStreams()).isZero();
  }

  @Test
  void zeroWaitersMeansNoExchangeEverWaits() {
    start(1 << 24, 1 << 20, 256, 1000, 0, Duration.ofSeconds(10));
    String body = Wire.chatCompletion("z", Wire.usage(50, 4, 50L));
    EnvoyStream g = exchange(GEN_REQ, headers("x-request-id", "z", "x-disagg-order", "concurrent"), "application/json");
    g.responseBody(List.of(utf8(body))).complete();
    assertThat(g.clientBodyUtf8()).isEqualTo(body);
    assertThat(g.metadata("disagg_usage", "outcome")).isEqualTo("context_timeout");
    assertThat(metrics.waitRefusedCount()).isEqualTo(1);
  }

  @Test
  void overlongCorrelationKeysAreNoKeys() {
    start(1 << 24, 1 << 20, 16, 1000, 10, Duration.ofSeconds(10));
    String key = "k".repeat(17);
    String ctxBody = Wire.chatCompletion("k", Wire.usage(50, 1, 10L));
    context(key, ctxBody);
    assertThat(store.size()).isZero();
    assertThat(metrics.exchangeCount(Phase.CONTEXT, Outcome.PASSTHROUGH_NO_CONTEXT)).isEqualTo(1);
    String genBody = Wire.chatCompletion("k", Wire.usage(50, 4, 50L));
    EnvoyStream g = exchange(GEN_REQ, headers("x-request-id", key), "application/json");
    g.responseBody(List.of(utf8(genBody))).complete();
    assertThat(g.clientBodyUtf8()).isEqualTo(genBody);
    assertThat(metrics.exchangeCount(Phase.GENERATION, Outcome.PASSTHROUGH_NO_CONTEXT)).isEqualTo(1);
  }

  @Test
  void storeEntriesAreBoundedAndAnEvictedContextMeansPassThrough() {
    start(1 << 24, 1 << 20, 256, 10, 10, Duration.ofSeconds(10));
    for (int i = 0; i < 200; i++) {
      context("e" + i, Wire.chatCompletion("e", Wire.usage(50, 1, 10L)));
    }
    store.cleanUp();
    assertThat(store.size()).isLessThanOrEqualTo(10);
    int rewritten = 0;
    for (int i = 0; i < 200; i++) {
      String genBody = Wire.chatCompletion("e", Wire.usage(50, 4, 50L));
      EnvoyStream g = exchange(GEN_REQ, headers("x-request-id", "e" + i), "application/json");
      g.responseBody(List.of(utf8(genBody))).complete();
      String outcome = g.metadata("disagg_usage", "outcome");
      assertThat(outcome).isIn("rewritten", "passthrough_no_context");
      if (outcome.equals("rewritten")) {
        rewritten++;
      } else {
        assertThat(g.clientBodyUtf8()).isEqualTo(genBody);
      }
    }
    assertThat(rewritten).isBetween(1, 10);
    assertThat(metrics.exchangeCount(Phase.GENERATION, Outcome.PASSTHROUGH_NO_CONTEXT)).isEqualTo(200 - rewritten);
  }

  /** Sends {@code chunks} chunks of {@code chunk}; after each, how far the client lags behind. */
  static int maxLag(EnvoyStream s, byte[] head, byte[] chunk, int chunks, byte[] tail) {
    int sent = 0;
    int lag = 0;
    s.responseChunk(head, false);
    sent += head.length;
    for (int i = 0; i < chunks; i++) {
      s.responseChunk(chunk, false);
      sent += chunk.length;
      lag = Math.max(lag, sent - s.clientBody().length);
    }
    s.responseChunk(tail, true);
    return lag;
  }

  @Test
  void anEndlessEventIsPassedThroughWithBoundedHolding() {
    int maxEvent = 64 * 1024;
    start(1 << 24, maxEvent, 256, 1000, 10, Duration.ofSeconds(10));
    // 32 MiB of one event without a blank line: the service never holds more than one event cap.
    streamsThroughOversize("big", "text/event-stream",
        utf8("data: {\"usage\":" + Wire.usage(50, 4, 50L) + ",\"pad\":\""), utf8("x".repeat(16 * 1024)), 2048, utf8("\"}\n\n"),
        maxEvent);
  }

  /**
   * A generation response of {@code head}, {@code count} × {@code chunk} and {@code tail}, above its cap,
   * after its context under {@code id}: every byte reaches the client, never more than {@code bound}
   * behind, and the exchange ends {@code oversize}.
   */
  private void streamsThroughOversize(
      String id, String contentType, byte[] head, byte[] chunk, int count, byte[] tail, int bound) {
    context(id, Wire.chatCompletion(id, Wire.usage(50, 1, 10L)));
    EnvoyStream g = exchange(GEN_REQ, headers("x-request-id", id), contentType);
    int lag = maxLag(g, head, chunk, count, tail);
    assertThat(lag).isLessThanOrEqualTo(bound);
    assertThat(g.clientBody().length).isEqualTo(head.length + count * chunk.length + tail.length);
    assertThat(g.metadata("disagg_usage", "outcome")).isEqualTo("oversize");
  }

  @Test
  void aJsonBodyAboveItsCapIsReleasedAndThenStreams() {
    int maxBody = 256 * 1024;
    start(maxBody, 1 << 20, 256, 1000, 10, Duration.ofSeconds(10));
    // Usage first: the streaming rewriter holds the usage object and everything after it until the body
    // ends, so here the held part crosses the cap (with usage last, only the usage object is held).
    byte[] chunk = utf8("y".repeat(16 * 1024));
    streamsThroughOversize("json", "application/json",
        utf8("{\"usage\":" + Wire.usage(50, 4, 50L) + ",\"pad\":\""), chunk, 1024, utf8("\"}"), maxBody + chunk.length);
    assertThat(metrics.exchangeCount(Phase.GENERATION, Outcome.OVERSIZE)).isEqualTo(1);
  }

  @Test
  void bytesHeldWhileWaitingAreBoundedByTheBodyCap() {
    int maxBody = 128 * 1024;
    start(maxBody, 1 << 20, 256, 1000, 10, Duration.ofSeconds(10));
    EnvoyStream g =
        exchange(GEN_REQ, headers("x-request-id", "hold", "x-disagg-order", "concurrent"), "text/event-stream");
    byte[] head = utf8(Wire.usageChunk(Wire.usage(50, 4, 50L)));
    byte[] chunk = utf8(Wire.chunk("z".repeat(4000)));
    int lag = maxLag(g, head, chunk, 2000, utf8(Wire.DONE));
    assertThat(lag).isLessThanOrEqualTo(maxBody + chunk.length);
    assertThat(g.owed()).isZero();
    assertThat(g.metadata("disagg_usage", "outcome")).isEqualTo("oversize");
    assertThat(store.waiters()).isZero();
  }
}
