package io.disaggusage.extproc.scenario;

import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static io.disaggusage.extproc.scenario.Flows.metadata;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.engines.ClientRequest;
import io.disaggusage.extproc.emulator.engines.DisaggEngine;
import io.disaggusage.extproc.emulator.engines.PrefixCache;
import io.disaggusage.extproc.emulator.engines.ScheduleOrder;
import io.disaggusage.extproc.emulator.engines.TrtLlmEngine;
import io.disaggusage.extproc.emulator.engines.VllmEngine;
import io.disaggusage.extproc.emulator.engines.WordTokenizer.Message;
import io.disaggusage.extproc.emulator.engines.WorkerCall;
import io.disaggusage.extproc.emulator.engines.WorkerReply;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeHandle;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.scenario.VectorRunner.Splits;
import io.disaggusage.extproc.testkit.EngineRequests;
import io.disaggusage.extproc.testkit.MsgpackBodies;
import io.disaggusage.extproc.testkit.MsgpackBodies.Style;
import io.disaggusage.extproc.testkit.OpenAiClientView;
import io.disaggusage.extproc.testkit.OpenAiClientView.ClientUsage;
import io.disaggusage.extproc.testkit.ScenarioVectors;
import io.disaggusage.extproc.testkit.ScenarioVectors.Vector;
import io.disaggusage.extproc.testkit.Wire;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The specification's cases of the engines' own wire, beyond the vectors of {@link
 * ExchangeSpecificationTest}: TensorRT-LLM's MessagePack requests (since PR #16873, content type still
 * {@code application/json}) with its perf-metrics event and headers, a rolling upgrade mixing JSON and
 * MessagePack legs, malformed MessagePack; the demo's simulated engines (TensorRT-LLM, vLLM) cold and
 * warm, in both orders, vLLM legs joined by their KV transfer alone; and a JSON response released chunk
 * by chunk, whose bytes before {@code usage} reach the client while the body is still coming.
 */
class EngineWireSpecificationTest extends ScenarioFixture {
  // ---- TensorRT-LLM MessagePack ----

  /** TensorRT-LLM's per-request metrics headers (perf_metrics.py), values as it formats them. */
  static final Map<String, String> TRT_METRICS_HEADERS =
      Map.of(
          "server-timing", "server_queue;dur=1.250000, server_ttft;dur=8.500000, server_e2e;dur=24.000000",
          "x-trtllm-start-end-time", "server-start;ts=12345.123456789, server-end;ts=12345.147456789",
          "x-trtllm-step-metrics", "server-step-0-forward;dur=2.100000, server-step-0-sample;dur=0.400000",
          "x-trtllm-ctx-chunk-metrics", "server-ctx-chunk-0-forward;dur=4.200000");

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
    assertThat(metadata(r[1], "outcome")).isEqualTo("rewritten");
    assertThat(metadata(r[1], "cached_tokens")).isEqualTo("9");
  }

  static Exchange.Builder msgpackPost(byte[] body) {
    return jsonPost(body).requestHeader("X-TRTLLM-Msgpack", "1").requestHeader("X-TRTLLM-return-metrics", "1");
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

  /** A rolling upgrade: the context call still in JSON, the generation call already in MessagePack. */
  @Test
  void aJsonContextLegJoinsAMessagePackGenerationLeg() {
    Vector v = ScenarioVectors.all().stream().filter(x -> x.name().equals("trtContextFirstJson")).findFirst().orElseThrow();
    Vector mixed = new Vector("mixed", v.order(), v.context(), ScenarioVectors.msgpack(v.generation(), Style.WIDE), v.expectedGeneration());
    ExchangeResult[] r =
        VectorExchanges.run(service.envoy, service.envoy, mixed,
            new Splits(Chunking.fixed(11), Chunking.fixed(33), Chunking.fixed(11), Chunking.fixed(13)));
    assertThat(r[1].clientResponse().body()).isEqualTo(v.expectedGeneration());
    assertThat(metadata(r[1], "outcome")).isEqualTo("rewritten");
  }

  /**
   * A body announced as MessagePack that is not one (a JSON array behind the header, a truncated body)
   * gets the outcome the equally broken JSON body gets: the exchange passes through untouched, the
   * worker gets the bytes as sent, and it is counted.
   */
  @Test
  void malformedMessagePackPassesThroughLikeMalformedJson() {
    String json = EngineRequests.trtRequest("generation_only", ",\"ctx_request_id\":" + EngineRequests.TRT_ID);
    byte[] msgpack = MsgpackBodies.fromJson(json, Style.COMPACT);
    byte[][][] pairs = {
      // Not a map at all (a JSON object behind the header is read as JSON: ForgedInputsFlowTest).
      {utf8("[" + json + "]"), utf8("[" + json + "]")},
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
      assertThat(metadata(viaMsgpack, "outcome")).isEqualTo(metadata(viaJson, "outcome"));
      assertThat(service.metrics.exchangeCount(phases[i], outcomes[i])).as(outcomes[i].label()).isEqualTo(expected);
    }
  }

  static Exchange.Builder withResponse(Exchange.Builder b, String body) {
    return b.responseHeader("content-type", "application/json").responseBody(body).responseContentLength();
  }

  /** Exchange counts by every phase and outcome, in a fixed order. */
  long[] counts() {
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

  // ---- the demo's simulated engines ----

  static Stream<Arguments> simulatedFlows() {
    List<Function<PrefixCache, DisaggEngine>> families = List.of(TrtLlmEngine::new, VllmEngine::new);
    List<Arguments> out = new ArrayList<>();
    for (Function<PrefixCache, DisaggEngine> family : families) {
      for (ScheduleOrder order : family.apply(new PrefixCache(16, 16)).orders()) {
        for (boolean stream : new boolean[] {false, true}) {
          for (String chunking : List.of("events", "fixed-7", "random+empty")) {
            String name = family.apply(new PrefixCache(16, 16)).name() + " " + (stream ? "SSE" : "JSON") + " "
                + order.label() + " " + chunking;
            out.add(Arguments.of(name, family, order, stream, chunking));
          }
        }
      }
    }
    return out.stream();
  }

  private static Chunking chunking(String name) {
    return switch (name) {
      case "events" -> Chunking.sseEvents();
      case "fixed-7" -> Chunking.fixed(7);
      default -> Chunking.random(name.hashCode(), 60).withEmptyFinalChunk();
    };
  }

  private static Exchange.Builder exchange(WorkerCall call, WorkerReply reply, Chunking chunking) {
    return exchange(call, reply, chunking, call.headers().get("x-request-id"));
  }

  /** The call as Envoy forwards it, with {@code requestId} as its x-request-id (null: none). */
  private static Exchange.Builder exchange(WorkerCall call, WorkerReply reply, Chunking chunking, String requestId) {
    Exchange.Builder b = Exchange.post(call.path(), call.bodyUtf8());
    call.headers().forEach((k, v) -> {
      if (!k.equals("content-type") && !k.equals("x-request-id")) {
        b.requestHeader(k, v);
      }
    });
    if (requestId != null) {
      b.requestHeader("x-request-id", requestId);
    }
    return b.responseHeader("content-type", reply.contentType()).responseBody(reply.body()).responseChunking(chunking);
  }

  /** What the client reads of a simulated engine's corrected reply: the context worker's truth. */
  private static void assertContextWorkersTruth(ExchangeResult[] r, WorkerReply ctx, boolean stream) throws Exception {
    assertClean(r[0]);
    assertClean(r[1]);
    String body = r[1].clientResponse().bodyUtf8();
    ClientUsage seen = stream ? OpenAiClientView.chatStream(body) : OpenAiClientView.chatCompletion(body);
    long prompt = ctx.truth().prompt();
    assertThat(seen).isEqualTo(new ClientUsage(prompt, ctx.truth().cached(), 20, prompt + 20));
    // Nothing but the usage changed: the ExchangeInvariants' OutsideUsage check, on every exchange.
  }

  /**
   * The simulated engines' bodies are what the official OpenAI SDK reads, the service corrects them
   * under any chunking and in both orders, and the corrected counts are the context worker's
   * prefix-cache truth, on a cold prompt and on the same prompt again.
   */
  @ParameterizedTest(name = "{0}")
  @MethodSource("simulatedFlows")
  void theClientGetsTheContextWorkersTruthColdAndWarm(
      String name, Function<PrefixCache, DisaggEngine> family, ScheduleOrder order, boolean stream, String chunking)
      throws Exception {
    DisaggEngine engine = family.apply(new PrefixCache(16, 1024));
    ClientRequest request =
        new ClientRequest(Wire.MODEL, List.of(new Message("user", "What does a prefix cache reuse? ".repeat(12))), 20, stream);
    for (int repeat = 0; repeat < 2; repeat++) {
      WorkerCall ctxCall = engine.contextCall(request, order);
      WorkerReply ctx = engine.context(ctxCall);
      WorkerCall genCall = engine.generationCall(request, order, ctxCall, ctx);
      WorkerReply gen = engine.generation(genCall);
      Exchange.Builder c = exchange(ctxCall, ctx, Chunking.whole());
      Exchange.Builder g = exchange(genCall, gen, chunking(chunking));
      ExchangeResult[] r =
          order == ScheduleOrder.CONTEXT_FIRST
              ? Flows.contextFirst(service.envoy, c, g)
              : Flows.generationFirst(service.envoy, c, g);
      assertContextWorkersTruth(r, ctx, stream);
      assertThat(r[0].clientResponse().body()).isEqualTo(ctx.body());
      ClientUsage reported = stream ? OpenAiClientView.chatStream(gen.bodyUtf8()) : OpenAiClientView.chatCompletion(gen.bodyUtf8());
      long prompt = ctx.truth().prompt();
      assertThat(reported.cached()).isGreaterThanOrEqualTo(prompt - 1);
      assertThat(ctx.truth().cached()).isEqualTo(repeat == 0 ? 0 : (prompt - 1) / 16 * 16);
    }
    assertThat(service.store.size()).isZero();
  }

  static Stream<Arguments> unsharedIds() {
    List<Arguments> out = new ArrayList<>();
    for (boolean stream : new boolean[] {false, true}) {
      for (String ids : List.of("each leg its own", "none")) {
        for (String chunking : List.of("events", "random+empty")) {
          out.add(Arguments.of((stream ? "SSE" : "JSON") + ", x-request-id: " + ids + ", " + chunking, stream, ids, chunking));
        }
      }
    }
    return out.stream();
  }

  /**
   * A router that shares no id (SMG; Envoy then gives each leg its own x-request-id, or a deployment
   * none at all): the decode request carries back the prefill response's {@code remote_request_id},
   * and that joins the legs.
   */
  @ParameterizedTest(name = "{0}")
  @MethodSource("unsharedIds")
  void vllmLegsThatShareNoIdJoinByTheirKvTransfer(String name, boolean stream, String ids, String chunking)
      throws Exception {
    DisaggEngine engine = new VllmEngine(new PrefixCache(16, 1024));
    ClientRequest request =
        new ClientRequest(Wire.MODEL, List.of(new Message("user", "Which leg holds the KV? ".repeat(9))), 20, stream);
    for (int repeat = 0; repeat < 2; repeat++) {
      WorkerCall ctxCall = engine.contextCall(request, ScheduleOrder.CONTEXT_FIRST);
      WorkerReply ctx = engine.context(ctxCall);
      WorkerCall genCall = engine.generationCall(request, ScheduleOrder.CONTEXT_FIRST, ctxCall, ctx);
      WorkerReply gen = engine.generation(genCall);
      boolean own = ids.equals("each leg its own");
      ExchangeResult[] r =
          Flows.contextFirst(
              service.envoy,
              exchange(ctxCall, ctx, Chunking.whole(), own ? "envoy-ctx-" + repeat : null),
              exchange(genCall, gen, chunking(chunking), own ? "envoy-gen-" + repeat : null));
      assertContextWorkersTruth(r, ctx, stream);
      assertThat(metadata(r[1], "outcome")).isEqualTo("rewritten");
    }
    // Both aliases of each entry went with it: nothing is left behind under the context's own id.
    assertThat(service.store.size()).isZero();
  }

  // ---- a JSON response released chunk by chunk ----

  static final String CTX_REQ = "{\"model\":\"m\",\"kv_transfer_params\":{\"do_remote_decode\":true}}";
  static final String GEN_REQ = "{\"model\":\"m\",\"kv_transfer_params\":{\"do_remote_prefill\":true}}";

  /** A chat completion with a long answer, so the part before usage is most of the body. */
  static String longAnswer(String usage) {
    return Wire.chatCompletion("s", usage).replace("Paris is the capital.", "Paris is the capital. ".repeat(200) + "End.");
  }

  static Exchange.Builder gatedJsonGeneration(String id, String body, Chunking chunking) {
    return Exchange.post(EngineRequests.PATH, GEN_REQ)
        .requestHeader("x-request-id", id)
        .responseHeader("content-type", "application/json")
        .responseBody(body)
        .responseContentLength()
        .responseChunking(chunking)
        .gateResponseBody();
  }

  static ExchangeResult jsonContext(ServiceUnderTest s, String id) {
    return Flows.run(
        s.envoy,
        Exchange.post(EngineRequests.PATH, CTX_REQ)
            .requestHeader("x-request-id", id)
            .responseHeader("content-type", "application/json")
            .responseBody(Wire.chatCompletion("c", Wire.usage(50, 1, 10L))));
  }

  @Test
  void jsonBytesBeforeUsageReachTheClientBeforeTheBodyEnds() throws Exception {
    assertClean(jsonContext(service, "stream-json"));
    String body = longAnswer(Wire.usage(50, 4, 50L));
    int usage = body.indexOf("\"usage\":");
    int[] cuts = {usage / 3, 2 * usage / 3, usage + 20};
    ExchangeHandle gen = service.envoy.start(gatedJsonGeneration("stream-json", body, Chunking.at(cuts)).build());
    gen.awaitResponseHeadersForwarded();
    gen.releaseResponseChunk();
    assertThat(gen.awaitClientBodyContaining(body.substring(cuts[0] - 10, cuts[0]))).isEqualTo(body.substring(0, cuts[0]));
    gen.releaseResponseChunk();
    byte[] two = gen.awaitClientBody(b -> b.length >= cuts[1]); // the text repeats: wait for the length
    assertThat(new String(two, StandardCharsets.UTF_8)).isEqualTo(body.substring(0, cuts[1]));
    // The chunk that starts the usage object: what precedes the object goes out, the object is held.
    gen.releaseResponseChunk();
    String upToUsage = body.substring(0, usage + "\"usage\":".length());
    assertThat(gen.awaitClientBodyContaining("\"usage\":")).isEqualTo(upToUsage);
    assertThat(gen.result()).isNotDone();
    gen.releaseResponseBody();
    ExchangeResult r = Flows.recorded(service.envoy, gen.awaitResult());
    assertClean(r);
    String expected = body.replace("{\"cached_tokens\":50}", "{\"cached_tokens\":10}");
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo(expected);
    assertThat(OpenAiClientView.chatCompletion(r.clientResponse().bodyUtf8())).isEqualTo(new ClientUsage(50, 10L, 4, 54));
    assertThat(metadata(r, "outcome")).isEqualTo("rewritten");
    assertThat(metadata(r, "cached_tokens")).isEqualTo("10");
  }

  @Test
  void concurrentJsonFlowForwardsWhatPrecedesUsageWhileItWaitsForTheContext() throws Exception {
    try (ServiceUnderTest s = new ServiceUnderTest(ServiceUnderTest.testConfig(Duration.ofMillis(2500)))) {
      String body = longAnswer(Wire.usage(50, 4, 50L));
      int usage = body.indexOf("\"usage\":");
      ExchangeHandle gen =
          s.envoy.start(
              gatedJsonGeneration("json-concurrent", body, Chunking.fixed(700).withEmptyFinalChunk())
                  .requestHeader("x-disagg-order", "concurrent")
                  .build());
      gen.awaitResponseHeadersForwarded();
      gen.releaseResponseBody();
      String upToUsage = body.substring(0, usage + "\"usage\":".length());
      assertThat(gen.awaitClientBodyContaining("\"usage\":")).isEqualTo(upToUsage);
      assertThat(gen.result()).isNotDone();
      assertClean(jsonContext(s, "json-concurrent"));
      ExchangeResult r = Flows.recorded(s.envoy, gen.awaitResult());
      assertClean(r);
      assertThat(r.clientResponse().bodyUtf8()).isEqualTo(body.replace("{\"cached_tokens\":50}", "{\"cached_tokens\":10}"));
      assertThat(metadata(r, "outcome")).isEqualTo("rewritten");
      assertThat(s.store.waiters()).isZero();
      assertThat(new String(gen.clientBodySoFar(), StandardCharsets.UTF_8)).isEqualTo(r.clientResponse().bodyUtf8());
    }
  }
}
