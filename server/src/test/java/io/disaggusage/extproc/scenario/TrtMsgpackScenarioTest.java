package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.ScenarioVectors;
import io.disaggusage.extproc.testkit.EngineRequests;
import io.disaggusage.extproc.testkit.Wire;
import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.testkit.ScenarioVectors.Vector;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.scenario.VectorRunner.Splits;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.testkit.MsgpackBodies;
import io.disaggusage.extproc.testkit.MsgpackBodies.Style;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * TensorRT-LLM since PR #16873 sends worker request bodies as MessagePack ({@code X-TRTLLM-Msgpack: 1},
 * content type still {@code application/json}), through the fake Envoy with the shipped filter
 * configuration: the perf-metrics SSE event and response headers, a rolling upgrade mixing JSON and
 * MessagePack legs, and malformed MessagePack. (Every TensorRT-LLM vector with MessagePack requests, the
 * Responses API hand-off included, is {@link ExchangeSpecificationTest}'s.)
 */
class TrtMsgpackScenarioTest {
  /** TensorRT-LLM's per-request metrics headers (perf_metrics.py), values as it formats them. */
  static final Map<String, String> TRT_METRICS_HEADERS =
      Map.of(
          "server-timing", "server_queue;dur=1.250000, server_ttft;dur=8.500000, server_e2e;dur=24.000000",
          "x-trtllm-start-end-time", "server-start;ts=12345.123456789, server-end;ts=12345.147456789",
          "x-trtllm-step-metrics", "server-step-0-forward;dur=2.100000, server-step-0-sample;dur=0.400000",
          "x-trtllm-ctx-chunk-metrics", "server-ctx-chunk-0-forward;dur=4.200000");

  /** One service for the class: every flow drains what it stores, and counts are read as deltas. */
  static ServiceUnderTest service;

  @BeforeAll
  static void startOnce() throws Exception {
    service = new ServiceUnderTest(ServiceUnderTest.testConfig());
  }

  @AfterAll
  static void stopOnce() throws Exception {
    service.close();
  }

  /**
   * With {@code X-TRTLLM-return-metrics: 1} workers add their timing headers, and a streaming worker
   * sends an {@code event: trtllm.perf_metrics} after {@code [DONE]}: all reach the client byte for
   * byte, on both legs, while the usage is corrected.
   */
  @Test
  void perfMetricsEventAndTrtResponseHeadersPassThroughByteForByte() {
    String ctxUsage = Wire.usage(128, 1, 9L);
    String perfEvent =
        "event: trtllm.perf_metrics\ndata: {\"Server-Timing\": \"" + TRT_METRICS_HEADERS.get("server-timing")
            + "\", \"X-TRTLLM-Step-Metrics\": \"" + TRT_METRICS_HEADERS.get("x-trtllm-step-metrics") + "\", \"usage\": null}\n\n";
    String stream = Wire.chatStream(Wire.usage(128, 2, 128L), "Par", "is") + perfEvent;
    byte[] ctxRequest = MsgpackBodies.fromJson(
        EngineRequests.trtRequest("context_only", ",\"disagg_request_id\":" + EngineRequests.TRT_ID), Style.COMPACT);
    byte[] genRequest = MsgpackBodies.fromJson(
        EngineRequests.trtRequest("generation_only", ",\"ctx_request_id\":" + EngineRequests.TRT_ID),
        Style.COMPACT);
    Exchange.Builder ctx =
        msgpackPost(ctxRequest)
            .responseHeader("content-type", "application/json")
            .responseBody(Wire.trtContextResponse(EngineRequests.TRT_ID, EngineRequests.TRT_ID, ctxUsage))
            .responseContentLength();
    Exchange.Builder gen =
        msgpackPost(genRequest)
            .responseHeader("content-type", "text/event-stream")
            .responseBody(stream)
            .responseChunking(Chunking.fixed(17));
    TRT_METRICS_HEADERS.forEach(ctx::responseHeader);
    TRT_METRICS_HEADERS.forEach(gen::responseHeader);
    ExchangeResult[] r = Flows.contextFirst(service.envoy, ctx, gen);
    for (ExchangeResult leg : r) {
      assertClean(leg);
      TRT_METRICS_HEADERS.forEach((name, value) -> assertThat(leg.clientResponse().header(name)).as(name).contains(value));
      assertThat(leg.upstreamRequest().headers().get("x-trtllm-return-metrics")).contains("1");
    }
    assertThat(r[1].clientResponse().bodyUtf8()).isEqualTo(stream.replace("{\"cached_tokens\":128}", "{\"cached_tokens\":9}"));
    assertThat(r[1].clientResponse().bodyUtf8()).endsWith(Wire.DONE + perfEvent);
    assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("rewritten");
    assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:cached_tokens)%")).isEqualTo("9");
  }

  static Exchange.Builder msgpackPost(byte[] body) {
    return Exchange.builder()
        .method("POST")
        .path(EngineRequests.PATH)
        .requestHeader("content-type", "application/json")
        .requestHeader("X-TRTLLM-Msgpack", "1")
        .requestHeader("X-TRTLLM-return-metrics", "1")
        .requestBody(body)
        .requestContentLength()
        .requestChunking(Chunking.fixed(9));
  }

  /** A rolling upgrade: the context call still in JSON, the generation call already in MessagePack. */
  @Test
  void aJsonContextLegJoinsAMessagePackGenerationLeg() {
    Vector v = ScenarioVectors.all().stream().filter(x -> x.name().equals("trtContextFirstJson")).findFirst().orElseThrow();
    Vector mixed = new Vector("mixed", v.order(), v.context(), ScenarioVectors.msgpack(v.generation(), Style.WIDE), v.expectedGeneration());
    ExchangeResult[] r =
        VectorExchanges.run(service.envoy, service.envoy, mixed,
            new Splits(Chunking.fixed(11), Chunking.fixed(33), Chunking.fixed(11), Chunking.fixed(13)));
    assertThat(r[1].clientResponse().body()).isEqualTo(v.expectedGeneration());
    assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("rewritten");
  }

  /**
   * A body announced as MessagePack that is not one (a JSON body behind the header, a truncated body)
   * gets the outcome the equally broken JSON body gets: the exchange passes through untouched, the
   * worker gets the bytes as sent, and it is counted.
   */
  @Test
  void malformedMessagePackPassesThroughLikeMalformedJson() {
    String json = EngineRequests.trtRequest("generation_only", ",\"ctx_request_id\":" + EngineRequests.TRT_ID);
    byte[] msgpack = MsgpackBodies.fromJson(json, Style.COMPACT);
    byte[][][] pairs = {
      {utf8(json), utf8("[" + json + "]")}, // JSON behind the MessagePack header: not a map at all
      // Cut after request_type was read, before the id: in both encodings the phase is known, the key not.
      {Arrays.copyOf(msgpack, MsgpackBodies.indexOf(msgpack, "ctx_request_id") - 1), utf8(json.substring(0, json.indexOf(",\"ctx_request_id\"")))},
    };
    Phase[] phases = {Phase.NONE, Phase.GENERATION};
    Outcome[] outcomes = {Outcome.NOT_DISAGGREGATED, Outcome.PASSTHROUGH_NO_CONTEXT};
    String genBody = Wire.chatCompletion("gen", Wire.usage(101, 13, 101L));
    for (int i = 0; i < pairs.length; i++) {
      byte[][] pair = pairs[i];
      long expected = service.metrics.exchangeCount(phases[i], outcomes[i]) + 2;
      long[] before = counts();
      ExchangeResult viaMsgpack = Flows.run(service.envoy, withResponse(msgpackPost(pair[0]), genBody));
      long[] afterMsgpack = counts();
      ExchangeResult viaJson = Flows.run(service.envoy, withResponse(jsonPost(pair[1]), genBody));
      long[] afterJson = counts();
      for (ExchangeResult r : new ExchangeResult[] {viaMsgpack, viaJson}) {
        assertClean(r);
        assertThat(r.clientResponse().bodyUtf8()).isEqualTo(genBody);
      }
      assertThat(viaMsgpack.upstreamRequest().body()).isEqualTo(pair[0]);
      assertThat(delta(before, afterMsgpack)).as("counted as malformed JSON is").isEqualTo(delta(afterMsgpack, afterJson));
      assertThat(Arrays.stream(delta(before, afterMsgpack)).sum()).as("counted").isEqualTo(1);
      assertThat(viaMsgpack.accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%"))
          .isEqualTo(viaJson.accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%"));
      assertThat(service.metrics.exchangeCount(phases[i], outcomes[i])).as(outcomes[i].label()).isEqualTo(expected);
    }
  }

  static Exchange.Builder withResponse(Exchange.Builder b, String body) {
    return b.responseHeader("content-type", "application/json").responseBody(body).responseContentLength();
  }

  static Exchange.Builder jsonPost(byte[] body) {
    return Exchange.builder()
        .method("POST")
        .path(EngineRequests.PATH)
        .requestHeader("content-type", "application/json")
        .requestBody(body)
        .requestContentLength()
        .requestChunking(Chunking.fixed(9));
  }

  /** Exchange counts by every phase and outcome, in a fixed order. */
  static long[] counts() {
    return Arrays.stream(Phase.values())
        .flatMap(p -> Arrays.stream(Outcome.values()).map(o -> service.metrics.exchangeCount(p, o)))
        .mapToLong(Number::longValue)
        .toArray();
  }

  static long[] delta(long[] a, long[] b) {
    long[] d = new long[a.length];
    Arrays.setAll(d, i -> b[i] - a[i]);
    return d;
  }

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
