package io.disaggusage.extproc.scenario;

import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static io.disaggusage.extproc.scenario.Flows.metadata;
import static io.disaggusage.extproc.testkit.ScenarioVectors.sglangRequest;
import static io.disaggusage.extproc.testkit.ScenarioVectors.sglangTwoChoiceStream;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.EnvoyProfile;
import io.disaggusage.extproc.emulator.envoy.EnvoyStats;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeHandle;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.testkit.OpenAiClientView;
import io.disaggusage.extproc.testkit.Wire;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The specification's cases of everything that must reach the client untouched, and of the failure
 * paths: never rewritten, never delayed beyond what the contract allows, nothing leaked. Paths the
 * service does not handle (Anthropic's {@code count_tokens} among them), legs that must not join (an
 * SGLang batch of other rooms, SGLang without cluster lists), misses, impossible counts, non-success,
 * compressed, malformed and oversize bodies, and a client gone mid-stream. (Responses already right,
 * which pass byte for byte although rewritten, are vectors of {@link ExchangeSpecificationTest}.)
 */
class PassThroughSpecificationTest extends ScenarioFixture {
  static final String PATH = "/v1/chat/completions";
  static final String GEN_BODY = Wire.chatCompletion("g", Wire.usage(50, 5, 50L));
  static final String VLLM_DECODE = "{\"kv_transfer_params\":{\"do_remote_prefill\":true}}";
  private static final String GENERATION_ONLY =
      "{\"model\":\"llama\",\"disaggregated_params\":{\"request_type\":\"generation_only\",\"ctx_request_id\":1}}";

  /** A generation call answered with {@link #GEN_BODY} as JSON, with its content-length. */
  static Exchange.Builder generation(String requestBody) {
    return Exchange.post(PATH, requestBody)
        .responseHeader("content-type", "application/json")
        .responseBody(GEN_BODY)
        .responseContentLength();
  }

  /** TRTLLM_DISAGG_BENCHMARK_GEN_ONLY: generation_only with ctx_request_id 1 and no context call. */
  private static Exchange.Builder generationOnlyWithoutContext() {
    return generation(GENERATION_ONLY);
  }

  /** A vLLM decode leg under {@code id}, its response {@code body} as SSE cut as given. */
  static Exchange.Builder decodeStream(String id, String body, Chunking chunking) {
    return Flows.gen(id, "text/event-stream", body).responseChunking(chunking);
  }

  /** A TensorRT-LLM leg whose {@code disaggregated_params} are {@code params}, answered with {@code body}. */
  static Exchange.Builder trtLeg(String params, String contentType, String body) {
    return Exchange.post(PATH, "{\"disaggregated_params\":{" + params + "}}")
        .responseHeader("content-type", contentType)
        .responseBody(body);
  }

  static long responseBodyMessages(ExchangeResult r) {
    return r.messagesSent().stream().filter(ProcessingRequest::hasResponseBody).count();
  }

  /** Only the request headers are sent for a path the service does not handle; nothing more. */
  static void assertNotInspected(ExchangeResult r) {
    assertClean(r);
    assertThat(r.messagesSent()).hasSize(1);
    assertThat(r.messagesSent().get(0).hasRequestHeaders()).isTrue();
  }

  @Test
  void unrelatedPathsGetOneMessageAndNothingMore() throws Exception {
    ExchangeResult health =
        Flows.run(service.envoy, Exchange.builder().method("GET").path("/health").responseBody("ok"));
    ExchangeResult embeddings =
        Flows.run(service.envoy, Exchange.post("/v1/embeddings", "{\"input\":\"x\"}").responseBody("{\"data\":[]}"));
    // vLLM's Anthropic Messages API: /v1/messages/count_tokens is not a handled path.
    ExchangeResult countTokens =
        Flows.run(
            service.envoy,
            Exchange.post("/v1/messages/count_tokens", "{\"model\":\"m\",\"messages\":[]}")
                .responseHeader("content-type", "application/json")
                .responseBody("{\"input_tokens\":5}"));
    List.of(health, embeddings, countTokens).forEach(PassThroughSpecificationTest::assertNotInspected);
    assertThat(embeddings.clientResponse().bodyUtf8()).isEqualTo("{\"data\":[]}");
    assertThat(countTokens.clientResponse().bodyUtf8()).isEqualTo("{\"input_tokens\":5}");
    assertThat(embeddings.upstreamRequest().headers().get("accept-encoding")).isEmpty();
    assertThat(service.metrics.exchangeCount(Phase.NONE, Outcome.NOT_DISAGGREGATED)).isEqualTo(3);
  }

  @Test
  void generationOnlyAndConditionalDisaggregationAreUntouched() throws Exception {
    // No disaggregated_params at all: the generation worker prefilled locally; its count is true.
    ExchangeResult r =
        Flows.run(service.envoy, generation("{\"model\":\"m\",\"messages\":[]}").requestHeader("x-request-id", "same"));
    assertClean(r);
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo(GEN_BODY);
    assertThat(OpenAiClientView.chatCompletion(r.clientResponse().bodyUtf8()).cached()).isEqualTo(50L);
    assertThat(r.clientResponse().header("content-length")).contains(Integer.toString(GEN_BODY.length()));
    assertThat(responseBodyMessages(r)).isZero();
    assertThat(r.dynamicMetadata()).isEmpty();
  }

  @Test
  void contextFirstMissIsReadOnlyForImpossibleCountsAndCarriesTheWorkersOwnNumbers() throws Exception {
    ExchangeResult r = Flows.run(service.envoy, generationOnlyWithoutContext());
    assertClean(r);
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo(GEN_BODY);
    assertThat(r.clientResponse().header("content-length")).isEmpty();
    assertThat(metadata(r, "outcome")).isEqualTo("passthrough_no_context");
    // Read, the response names its model, as in a rewritten exchange; unread, the request did.
    assertThat(metadata(r, "model")).isEqualTo(Wire.MODEL);
    assertThat(metadata(r, "corrected")).isEqualTo("false");
    assertThat(metadata(r, "cached_tokens")).isEqualTo("50");
    assertThat(service.metrics.exchangeCount(Phase.GENERATION, Outcome.PASSTHROUGH_NO_CONTEXT)).isEqualTo(1);
  }

  @Test
  void aCountThatCannotBeTrueIsClampedWithoutContextUsageInJsonAndSse() throws Exception {
    // A client forging remote_prefill_cached_tokens through a router that merges its params (vLLM
    // #58728), on a flow whose context leg was never seen: the worker's count is all there is.
    ExchangeResult json =
        Flows.run(service.envoy, generationOnlyWithoutContext().responseBody(Wire.chatCompletion("g", Wire.usage(50, 5, -5L))));
    ExchangeResult sse =
        Flows.run(
            service.envoy,
            Exchange.post(PATH, GENERATION_ONLY)
                .responseHeader("content-type", "text/event-stream")
                .responseBody(Wire.chatStream(Wire.usage(50, 2, 9999L), "a", "b")));
    assertClean(json);
    assertClean(sse);
    assertThat(OpenAiClientView.chatCompletion(json.clientResponse().bodyUtf8()).cached()).isZero();
    assertThat(json.clientResponse().bodyUtf8()).isEqualTo(Wire.chatCompletion("g", Wire.usage(50, 5, 0L)));
    assertThat(sse.clientResponse().bodyUtf8()).isEqualTo(Wire.chatStream(Wire.usage(50, 2, 50L), "a", "b"));
    for (ExchangeResult r : List.of(json, sse)) {
      assertThat(metadata(r, "outcome")).isEqualTo("impossible_count");
      assertThat(metadata(r, "corrected")).isEqualTo("true");
    }
    assertThat(metadata(json, "reported_cached_tokens")).isEqualTo("-5");
    assertThat(service.metrics.exchangeCount(Phase.GENERATION, Outcome.IMPOSSIBLE_COUNT)).isEqualTo(2);
  }

  @Test
  void withoutTheClampAContextFirstMissIsDecidedAtHeadersAndAnImpossibleCountPassesUnread() throws Exception {
    try (ServiceUnderTest s = new ServiceUnderTest(ServiceUnderTest.withoutClamp(ServiceUnderTest.testConfig()))) {
      String forged = Wire.chatCompletion("g", Wire.usage(50, 5, -5L));
      for (String body : List.of(GEN_BODY, forged)) {
        ExchangeResult r = Flows.run(s.envoy, generationOnlyWithoutContext().responseBody(body));
        assertClean(r);
        assertThat(r.clientResponse().bodyUtf8()).isEqualTo(body);
        assertThat(responseBodyMessages(r)).isZero();
        assertThat(metadata(r, "outcome")).isEqualTo("passthrough_no_context");
        assertThat(metadata(r, "model")).isEqualTo("llama");
        assertThat(r.dynamicMetadataValue("disagg_usage", "cached_tokens")).isEmpty();
      }
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.PASSTHROUGH_NO_CONTEXT)).isEqualTo(2);
    }
  }

  @Test
  void nonSuccessCompressedAndMalformedGenerationResponsesPassUnchanged() throws Exception {
    String gen = "{\"model\":\"m\",\"kv_transfer_params\":{\"do_remote_prefill\":true}}";
    for (String id : List.of("a", "b", "c")) {
      Flows.run(service.envoy, Flows.ctx(id, Wire.chatCompletion(id, Wire.usage(50, 1, 10L))));
    }
    ExchangeResult error =
        Flows.run(
            service.envoy,
            Exchange.post(PATH, gen)
                .requestHeader("x-request-id", "a")
                .responseStatus(500)
                .responseHeader("content-type", "application/json")
                .responseBody("{\"error\":{\"message\":\"boom\",\"usage\":{\"prompt_tokens\":1}}}"));
    byte[] gzipped = {0x1f, (byte) 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3};
    ExchangeResult compressed =
        Flows.run(
            service.envoy,
            Exchange.post(PATH, gen)
                .requestHeader("x-request-id", "b")
                .requestHeader("accept-encoding", "gzip, deflate")
                .responseHeader("content-type", "application/json")
                .responseHeader("content-encoding", "gzip")
                .responseBody(gzipped));
    String broken = GEN_BODY.substring(0, GEN_BODY.length() - 3);
    ExchangeResult malformed =
        Flows.run(service.envoy, Flows.gen("c", "application/json", broken).requestBody(gen).responseChunking(Chunking.fixed(10)));
    List.of(error, compressed, malformed).forEach(Flows::assertClean);
    assertThat(error.clientResponse().status()).isEqualTo(500);
    assertThat(error.clientResponse().bodyUtf8()).contains("boom");
    assertThat(responseBodyMessages(error)).isZero();
    assertThat(compressed.clientResponse().body()).isEqualTo(gzipped);
    assertThat(compressed.upstreamRequest().headers().get("accept-encoding")).isEmpty();
    assertThat(responseBodyMessages(compressed)).isZero();
    assertThat(malformed.clientResponse().bodyUtf8()).isEqualTo(broken);
    assertThat(metadata(malformed, "outcome")).isEqualTo("parse_error");
    assertThat(service.metrics.exchangeCount(Phase.GENERATION, Outcome.PARSE_ERROR)).isEqualTo(1);
  }

  @Test
  void contextWorkerFinishingAloneIsForwardedAndItsEntryExpires() throws Exception {
    String done = Wire.trtContextResponse("77", "77", Wire.usage(20, 1, 0L)).replace("\"length\"", "\"stop\"");
    ExchangeResult r =
        Flows.run(
            service.envoy,
            trtLeg("\"request_type\":\"context_only\",\"disagg_request_id\":77", "application/json", done).responseContentLength());
    assertClean(r);
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo(done);
    assertThat(r.clientResponse().header("content-length")).contains(Integer.toString(done.length()));
    assertThat(service.store.size()).isEqualTo(1); // bounded by the store's TTL and size
  }

  @Test
  void generationFirstDeadlinePassesTheWorkersUsageAndExtendsEnvoysTimer() throws Exception {
    try (ServiceUnderTest s = new ServiceUnderTest(ServiceUnderTest.testConfig(Duration.ofMillis(400)))) {
      String stream = Wire.chatStream(Wire.usage(40, 3, 40L), "a", "b");
      long start = System.nanoTime();
      ExchangeResult r =
          Flows.run(
              s.envoy,
              trtLeg("\"request_type\":\"generation_only\",\"ctx_request_id\":404,\"schedule_style\":1", "text/event-stream", stream)
                  .responseChunking(Chunking.fixed(60))
                  // replies return between chunks, so Envoy's timer runs for the last message
                  .responseChunkDelay(Duration.ofMillis(20)));
      long elapsedMillis = (System.nanoTime() - start) / 1_000_000;
      assertClean(r);
      assertThat(r.clientResponse().bodyUtf8()).isEqualTo(stream);
      assertThat(OpenAiClientView.chatStream(r.clientResponse().bodyUtf8()).cached()).isEqualTo(40L);
      assertThat(elapsedMillis).isGreaterThanOrEqualTo(400);
      assertThat(r.stats().get(EnvoyStats.OVERRIDE_MESSAGE_TIMEOUT_RECEIVED)).isGreaterThanOrEqualTo(1);
      assertThat(metadata(r, "outcome")).isEqualTo("context_timeout");
      assertThat(metadata(r, "cached_tokens")).isEqualTo("40");
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.CONTEXT_TIMEOUT)).isEqualTo(1);
      assertThat(s.store.waiters()).isZero();
    }
  }

  @Test
  void contentBeforeTheUsageEventIsNotDelayedWhileWaiting() throws Exception {
    try (ServiceUnderTest s = new ServiceUnderTest(ServiceUnderTest.testConfig(Duration.ofSeconds(2)))) {
      String content = Wire.chunk("Hel") + Wire.chunk("lo");
      String stream = content + Wire.usageChunk(Wire.usage(40, 3, 40L)) + Wire.DONE;
      ExchangeHandle gen = Flows.startConcurrent(s.envoy, decodeStream("w", stream, Chunking.at(content.length())));
      assertThat(gen.awaitClientBodyContaining("lo\"")).isEqualTo(content);
      assertThat(gen.result()).isNotDone();
      ExchangeResult ctx =
          Flows.run(
              s.envoy,
              Exchange.post(PATH, "{\"kv_transfer_params\":{\"do_remote_decode\":true}}")
                  .requestHeader("x-request-id", "w")
                  .responseHeader("content-type", "application/json")
                  .responseBody(Wire.chatCompletion("w", Wire.usage(40, 1, 8L))));
      assertClean(ctx);
      ExchangeResult g = Flows.recorded(s.envoy, gen.awaitResult());
      assertClean(g);
      assertThat(g.clientResponse().bodyUtf8()).isEqualTo(stream.replace("{\"cached_tokens\":40}", "{\"cached_tokens\":8}"));
      assertThat(OpenAiClientView.chatStream(g.clientResponse().bodyUtf8()).cached()).isEqualTo(8L);
    }
  }

  @Test
  void oversizeBodiesAndEventsPassThroughAndAreCounted() throws Exception {
    Config d = ServiceUnderTest.testConfig();
    Config small =
        new Config(d.grpc(), d.admin(), d.classification(), d.ordering(), d.store(), d.metadata(),
            new Config.Limits(200, 150, 64 * 1024, 256, d.limits().maxWaiters()), d.metrics(), d.logging(), d.shutdown(), d.streaming(), d.edgeGuard());
    try (ServiceUnderTest s = new ServiceUnderTest(small)) {
      for (String id : List.of("j", "e")) {
        Flows.run(s.envoy, Flows.ctx(id, "{\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":1,\"total_tokens\":10}}"));
      }
      // A JSON body is held from its usage object on: usage first, the held part crosses the cap.
      String usageFirst =
          "{\"usage\":" + Wire.usage(50, 5, 50L) + "," + GEN_BODY.substring(1, GEN_BODY.indexOf(",\"usage\":")) + "}";
      ExchangeResult json =
          Flows.run(s.envoy, Flows.gen("j", "application/json", usageFirst).responseChunking(Chunking.fixed(50)));
      String bigEvent = Wire.usageChunk(Wire.usage(9, 2, 9L));
      ExchangeResult sse = Flows.run(s.envoy, decodeStream("e", bigEvent + Wire.DONE, Chunking.fixed(40)));
      assertClean(json);
      assertClean(sse);
      assertThat(usageFirst.length()).isGreaterThan(200);
      assertThat(json.clientResponse().bodyUtf8()).isEqualTo(usageFirst);
      assertThat(sse.clientResponse().bodyUtf8()).isEqualTo(bigEvent + Wire.DONE);
      assertThat(metadata(json, "outcome")).isEqualTo("oversize");
      assertThat(metadata(sse, "outcome")).isEqualTo("oversize");
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.OVERSIZE)).isEqualTo(2);
    }
  }

  @Test
  void duplicateEndOfStreamAndClientCancelLeaveNothingBehind() throws Exception {
    Flows.run(service.envoy, Flows.ctx("d", Wire.chatCompletion("d", Wire.usage(50, 1, 10L))));
    String stream = Wire.chatStream(Wire.usage(50, 4, 50L), "x", "y");
    ExchangeResult dup =
        Flows.run(service.envoy, decodeStream("d", stream, Chunking.fixed(30)).duplicateFinalBodyMessage());
    assertClean(dup);
    assertThat(dup.clientResponse().bodyUtf8()).isEqualTo(stream.replace("{\"cached_tokens\":50}", "{\"cached_tokens\":10}"));
    assertThat(OpenAiClientView.chatStream(dup.clientResponse().bodyUtf8()).cached()).isEqualTo(10L);

    ExchangeResult cancelled =
        Flows.run(
            service.envoy,
            decodeStream("never", stream, Chunking.fixed(30))
                .requestHeader("x-disagg-order", "concurrent")
                .downstreamResetAfterResponseChunks(4));
    assertThat(cancelled.clientResponse().reset()).isTrue();
    service.awaitStreamsEnded();
    assertThat(service.metrics.activeStreams()).isZero();
    assertThat(service.store.waiters()).isZero();
  }

  @Test
  void overNettyLoopbackWithEveryEnvoyProfile() throws Exception {
    for (EnvoyProfile profile : EnvoyProfile.values()) {
      try (ServiceUnderTest s =
          new ServiceUnderTest(ServiceUnderTest.testConfig(), ServiceUnderTest.Transport.NETTY_LOOPBACK, profile)) {
        String stream = Wire.chatStream(Wire.usage(128, 5, 128L), "a", "b", "c");
        long id = Long.MAX_VALUE; // 9223372036854775807: an int64 id far above 2^53
        ExchangeResult[] r =
            Flows.generationFirst(
                s.envoy,
                trtLeg("\"request_type\":\"context_only\",\"disagg_request_id\":" + id + ",\"schedule_style\":1", "application/json",
                    Wire.trtContextResponse(Long.toString(Long.MAX_VALUE), Long.toString(Long.MAX_VALUE), Wire.usage(128, 1, 9L))),
                trtLeg("\"request_type\":\"generation_only\",\"ctx_request_id\":" + id + ",\"schedule_style\":1", "text/event-stream", stream)
                    .responseChunking(Chunking.random(7, 30).withEmptyFinalChunk()));
        assertClean(r[0]);
        assertClean(r[1]);
        assertThat(r[1].clientResponse().bodyUtf8()).as(profile.name())
            .isEqualTo(stream.replace("{\"cached_tokens\":128}", "{\"cached_tokens\":9}"));
        s.awaitStreamsEnded();
        assertThat(s.metrics.activeStreams()).as("active streams after %s", profile).isZero();
      }
    }
  }

  /**
   * SGLang PD (engines.md §4) joins legs on {@code bootstrap_host} + {@code bootstrap_room}: the context
   * leg of another batch (one room differs) finishes first and is stored; this batch's generation leg
   * (rooms [1,3]) must not take it: it waits, then passes unchanged.
   */
  @Test
  void anotherSglangBatchIsNotJoinedToThisOne() throws Exception {
    String gen = sglangTwoChoiceStream(Wire.usage(300, 40, 300L));
    Flows.run(service.envoy, sglangLeg(sglangRequest("[1,2]", "\"10.1.0.5\"", 2), sglangTwoChoiceStream(Wire.usage(300, 2, 256L)),
        Chunking.fixed(50), ServiceUnderTest.CONTEXT_CLUSTER));
    ExchangeResult r = Flows.run(service.envoy,
        sglangLeg(sglangRequest("[1,3]", "\"10.1.0.5\"", 2), gen, Chunking.whole(), ServiceUnderTest.GENERATION_CLUSTER)
            .responseContentLength());
    assertClean(r);
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo(gen);
    assertThat(metadata(r, "outcome")).isEqualTo("context_timeout");
  }

  /** Without the cluster lists SGLang's two identical bodies say nothing: both legs pass untouched. */
  @Test
  void sglangWithoutClusterNamesIsNotTouched() throws Exception {
    String gen = Wire.chatStream(Wire.usage(300, 20, 300L), "H");
    ExchangeResult r = Flows.run(service.envoy,
        sglangLeg(sglangRequest("7", "\"10.1.0.5\"", 1), gen, Chunking.fixed(40), "some-other-pool").responseContentLength());
    assertClean(r);
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo(gen);
    // Not disaggregated: the service stops at the request and sets no metadata at all.
    assertThat(metadata(r, "outcome")).isNull();
    assertThat(r.messagesSent()).noneMatch(m -> m.hasResponseBody());
  }

  /** An SGLang leg to the pool {@code cluster}: the same body on both legs, a stream back. */
  static Exchange.Builder sglangLeg(String body, String stream, Chunking chunking, String cluster) {
    return Exchange.post(PATH, body)
        .requestAttribute("xds.cluster_name", cluster)
        .responseHeader("content-type", "text/event-stream")
        .responseBody(stream)
        .responseChunking(chunking);
  }
}
