package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.OpenAiClientView;
import io.disaggusage.extproc.testkit.Wire;
import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.inject.InjectionOutcome;
import io.disaggusage.extproc.inject.UsageRemoval;
import io.disaggusage.extproc.testkit.OpenAiClientView.ClientUsage;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeHandle;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import java.time.Duration;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * {@code streaming.inject_include_usage} end to end through the fake Envoy: the worker receives a
 * request that asks for usage (and no stale {@code content-length}), answers with the usage chunk, the
 * service uses its corrected numbers for dynamic metadata and metrics, and the client receives exactly
 * the bytes the worker would have sent without the injection — whatever the chunking of either body.
 * (The specification's invariants hold here too: outside {@code usage} the client's bytes are the
 * worker's, less the usage event the client never asked for.)
 */
class IncludeUsageInjectionSpecificationTest extends ScenarioFixture {
  static final String PATH = "/v1/chat/completions";
  static final String ADDED = ",\"stream_options\":{\"include_usage\":true}";
  static final String MESSAGES = "\"messages\":[{\"role\":\"user\",\"content\":\"capital of France?\"}]";

  static Config injecting(Config c) {
    return new Config(c.grpc(), c.admin(), c.classification(), c.ordering(), c.store(), c.metadata(), c.limits(),
        c.metrics(), c.logging(), c.shutdown(), new Config.Streaming(true), Config.defaults().edgeGuard());
  }

  @Override
  Config config() {
    return injecting(ServiceUnderTest.testConfig());
  }

  static String vllmPrefill() {
    return "{\"model\":\"" + Wire.MODEL + "\"," + MESSAGES + ",\"max_tokens\":1,\"stream\":false,"
        + "\"kv_transfer_params\":{\"do_remote_decode\":true,\"do_remote_prefill\":false}}";
  }

  /** A vLLM proxy's decode request: the client's stream flags, then the transfer marker at the end. */
  static String vllmDecode(String streamOptions) {
    return "{\"model\":\"" + Wire.MODEL + "\"," + MESSAGES + ",\"max_tokens\":32,\"stream\":true" + streamOptions
        + ",\"kv_transfer_params\":{\"do_remote_prefill\":true,\"do_remote_decode\":false,\"remote_block_ids\":[1,2]}}";
  }

  /** The vLLM prefill leg: a JSON response with the context usage, under {@code x-request-id: key}. */
  static Exchange.Builder prefill(String key, String usage) {
    return Exchange.post(PATH, vllmPrefill()).requestHeader("x-request-id", key)
        .responseHeader("content-type", "application/json")
        .responseBody(Wire.chatCompletion(key, usage));
  }

  static String asked(String body) {
    return body.substring(0, body.length() - 1) + ADDED + "}";
  }

  static Exchange.Builder leg(String requestBody, Chunking requestChunking, String response, Chunking responseChunking) {
    return Exchange.post(PATH, requestBody)
        .requestChunking(requestChunking)
        .responseHeader("content-type", "text/event-stream")
        .responseBody(response)
        .responseChunking(responseChunking);
  }

  static Stream<Arguments> chunkings() {
    return Stream.of(
        Arguments.of("whole", Chunking.whole(), Chunking.whole()),
        Arguments.of("bytewise", Chunking.bytewise(), Chunking.bytewise()),
        Arguments.of("fixed-7/13", Chunking.fixed(7), Chunking.fixed(13)),
        Arguments.of("random+empty", Chunking.random(3, 40).withEmptyFinalChunk(), Chunking.random(4, 90).withEmptyFinalChunk()));
  }

  void assertMetadata(ExchangeResult gen, String outcome, long prompt, long cached, long completion) {
    assertThat(gen.accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo(outcome);
    assertThat(gen.accessLog("%DYNAMIC_METADATA(disagg_usage:prompt_tokens)%")).isEqualTo(Long.toString(prompt));
    assertThat(gen.accessLog("%DYNAMIC_METADATA(disagg_usage:cached_tokens)%")).isEqualTo(Long.toString(cached));
    assertThat(gen.accessLog("%DYNAMIC_METADATA(disagg_usage:completion_tokens)%")).isEqualTo(Long.toString(completion));
    assertThat(gen.accessLog("%DYNAMIC_METADATA(disagg_usage:total_tokens)%")).isEqualTo(Long.toString(prompt + completion));
  }

  /** vLLM P/D, context-first: the decode request had no stream_options. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("chunkings")
  void vllmDecodeStreamGetsUsageTheClientNeverSees(String name, Chunking requests, Chunking responses) throws Exception {
    String original = vllmDecode("");
    String sent = asked(original);
    String genUsage = Wire.usage(1656, 20, 1655L);
    String answer = StreamingEngine.VLLM.chatStream(sent, genUsage, "Par", "is");
    String unasked = StreamingEngine.VLLM.chatStream(original, genUsage, "Par", "is");
    assertThat(answer).isNotEqualTo(unasked);

    ExchangeResult[] r = Flows.contextFirst(service.envoy,
        prefill("r-1", Wire.usage(1656, 1, 1024L)).requestChunking(requests),
        leg(original, requests, answer, responses).requestHeader("x-request-id", "r-1"));

    assertClean(r[0]);
    assertClean(r[1]);
    assertThat(r[0].upstreamRequest().bodyUtf8()).isEqualTo(vllmPrefill()); // stream false: untouched
    assertThat(r[1].upstreamRequest().bodyUtf8()).isEqualTo(sent);
    assertThat(r[1].upstreamRequest().headers().contains("content-length")).isFalse();
    assertThat(r[1].upstreamRequest().contentLengthMismatch()).isFalse();
    assertThat(r[1].clientResponse().bodyUtf8()).isEqualTo(unasked);
    assertThat(OpenAiClientView.chatStreamRead(r[1].clientResponse().bodyUtf8()))
        .isEqualTo(new OpenAiClientView.ChatStream("Paris", java.util.List.of()));
    assertMetadata(r[1], "rewritten", 1656, 1024, 20);
    assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:reported_cached_tokens)%")).isEqualTo("1655");
    assertThat(service.metrics.tokenCount(Wire.MODEL, "cached")).isEqualTo(1024);
    assertThat(service.metrics.injectionCount(InjectionOutcome.INJECTED)).isEqualTo(1);
    assertThat(service.metrics.injectionCount(InjectionOutcome.NOT_STREAMING)).isEqualTo(1);
    assertThat(service.metrics.injectedUsageEventCount(UsageRemoval.REMOVED)).isEqualTo(1);
  }

  /** SGLang: both legs stream with the client's flags, concurrently; the generation finishes first. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("chunkings")
  void sglangBothLegsAskAndTheHeldUsageIsCorrectedThenRemoved(String name, Chunking requests, Chunking responses)
      throws Exception {
    String original = "{\"model\":\"" + Wire.MODEL + "\"," + MESSAGES + ",\"stream\":true,"
        + "\"stream_options\":{\"continuous_usage_stats\":false},\"bootstrap_host\":\"10.1.0.5\",\"bootstrap_port\":8998,"
        + "\"bootstrap_room\":9223372036854775806}";
    String sent = original.replace("{\"continuous_usage_stats\"", "{\"include_usage\":true,\"continuous_usage_stats\"");
    String ctxUsage = Wire.usage(300, 1, 256L);
    String genUsage = Wire.usage(300, 20, 300L);

    ExchangeResult[] r = Flows.generationFirst(service.envoy,
        leg(original, requests, StreamingEngine.SGLANG.chatStream(sent, ctxUsage, "H"), Chunking.fixed(50))
            .requestAttribute("xds.cluster_name", ServiceUnderTest.CONTEXT_CLUSTER),
        leg(original, requests, StreamingEngine.SGLANG.chatStream(sent, genUsage, "H", "ello"), responses)
            .requestAttribute("xds.cluster_name", ServiceUnderTest.GENERATION_CLUSTER));

    for (ExchangeResult leg : r) {
      assertClean(leg);
      assertThat(leg.upstreamRequest().bodyUtf8()).isEqualTo(sent);
    }
    // The router receives the context stream, the client the generation stream, both as unasked.
    assertThat(r[0].clientResponse().bodyUtf8()).isEqualTo(StreamingEngine.SGLANG.chatStream(original, ctxUsage, "H"));
    assertThat(r[1].clientResponse().bodyUtf8()).isEqualTo(StreamingEngine.SGLANG.chatStream(original, genUsage, "H", "ello"));
    assertMetadata(r[1], "rewritten", 300, 256, 20);
    assertThat(service.metrics.injectionCount(InjectionOutcome.INJECTED)).isEqualTo(2);
    assertThat(service.metrics.injectedUsageEventCount(UsageRemoval.REMOVED)).isEqualTo(2);
  }

  @Test
  void contentFlowsWhileTheInjectedUsageWaitsForTheContextLeg() throws Exception {
    String content = Wire.chunk("Par") + Wire.chunk("is");
    String answer = content + Wire.usageChunk(Wire.usage(40, 3, 40L)) + Wire.DONE;
    ExchangeHandle decode = Flows.startConcurrent(service.envoy,
        leg(vllmDecode(""), Chunking.whole(), answer, Chunking.at(content.length())).requestHeader("x-request-id", "w"));
    // The content reaches the client while the usage event waits for the context leg, unsent.
    assertThat(decode.awaitClientBodyContaining("is\"")).isEqualTo(content);
    assertThat(decode.result()).isNotDone();
    assertClean(Flows.run(service.envoy, prefill("w", Wire.usage(40, 1, 8L))));
    ExchangeResult done = Flows.recorded(service.envoy, decode.awaitResult());
    assertClean(done);
    assertThat(done.clientResponse().bodyUtf8()).isEqualTo(content + Wire.DONE);
    assertMetadata(done, "rewritten", 40, 8, 3);
  }

  @Test
  void aResponseBeforeTheRequestEndedStopsTheRewriteAndGivesHeldBytesBack() throws Exception {
    String original = vllmDecode(",\"stream_options\":{\"include_usage\":false}");
    int cut = original.indexOf("include_usage") + 5; // inside the held stream_options value
    String answer = StreamingEngine.VLLM.chatStream(original, Wire.usage(9, 1, 9L), "x");
    ExchangeHandle h = service.envoy.start(
        leg(original, Chunking.at(cut), answer, Chunking.whole())
            .requestHeader("x-request-id", "early")
            .interleaveDirections()
            .gateRequestBody()
            .gateResponseHeaders()
            .build());
    h.awaitRequestHeadersForwarded();
    h.releaseRequestChunk();
    h.awaitMessagesSent(2);
    h.releaseResponseHeaders();
    h.awaitResponseHeadersForwarded();
    h.releaseRequestBody();
    ExchangeResult r = Flows.recorded(service.envoy, h.awaitResult());

    assertClean(r);
    // The first chunk's reply stopped where stream_options began; the next one carried the rest.
    var requestBodyReplies = r.messagesReceived().stream().filter(m -> m.hasRequestBody()).toList();
    assertThat(requestBodyReplies.get(0).getRequestBody().getResponse().getBodyMutation().getBody().toStringUtf8())
        .isEqualTo(original.substring(0, original.indexOf("{\"include_usage\"")));
    assertThat(r.upstreamRequest().bodyUtf8()).isEqualTo(original);
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo(answer);
    assertThat(service.metrics.injectionCount(InjectionOutcome.UNFINISHED)).isEqualTo(1);
  }

  @Test
  void aClientThatAskedItselfSeesItsCorrectedUsageAndNothingElseChanges() throws Exception {
    String original = vllmDecode(",\"stream_options\":{\"include_usage\":true}");
    String answer = StreamingEngine.VLLM.chatStream(original, Wire.usage(186, 8, 186L), "Hi");
    ExchangeResult[] r = Flows.contextFirst(service.envoy,
        prefill("r-2", Wire.usage(186, 1, 64L)),
        leg(original, Chunking.fixed(9), answer, Chunking.fixed(11)).requestHeader("x-request-id", "r-2"));

    assertClean(r[1]);
    assertThat(r[1].upstreamRequest().bodyUtf8()).isEqualTo(original);
    assertThat(r[1].clientResponse().bodyUtf8()).isEqualTo(answer.replace("{\"cached_tokens\":186}", "{\"cached_tokens\":64}"));
    assertThat(OpenAiClientView.chatStream(r[1].clientResponse().bodyUtf8())).isEqualTo(new ClientUsage(186, 64L, 8, 194));
    assertThat(service.metrics.injectionCount(InjectionOutcome.CLIENT_ASKED)).isEqualTo(1);
    for (UsageRemoval result : UsageRemoval.values()) {
      assertThat(service.metrics.injectedUsageEventCount(result)).isZero();
    }
  }

  @Test
  void aContextFirstMissIsReadForTheInjectedEventAndReportsTheWorkersNumbers() throws Exception {
    String original = vllmDecode("");
    String answer = StreamingEngine.VLLM.chatStream(asked(original), Wire.usage(64, 5, 63L), "x");
    ExchangeResult g = Flows.run(service.envoy,
        leg(original, Chunking.fixed(16), answer, Chunking.fixed(10)).requestHeader("x-request-id", "never-stored"));

    assertClean(g);
    assertThat(g.clientResponse().bodyUtf8()).isEqualTo(StreamingEngine.VLLM.chatStream(original, "", "x"));
    assertMetadata(g, "passthrough_no_context", 64, 63, 5);
    assertThat(service.metrics.injectedUsageEventCount(UsageRemoval.REMOVED)).isEqualTo(1);
  }

  @Test
  void messagePackMalformedAndNonStreamingBodiesPassUnchangedAndAreCounted() throws Exception {
    byte[] msgpack = {(byte) 0x82, (byte) 0xa6, 's', 't', 'r', 'e', 'a', 'm', (byte) 0xc3, (byte) 0xa5, 'm', 'o', 'd', 'e', 'l', (byte) 0xa1, 'm'};
    ExchangeResult packed = Flows.run(service.envoy,
        Exchange.builder().method("POST").path(PATH).requestHeader("content-type", "application/json")
            .requestHeader("x-trtllm-msgpack", "1").requestHeader("x-disagg-phase", "generation")
            .requestHeader("x-disagg-request-id", "m-1").requestBody(msgpack).requestContentLength()
            .responseHeader("content-type", "text/event-stream").responseBody(Wire.chunk("a") + Wire.DONE));
    assertClean(packed);
    assertThat(packed.upstreamRequest().body()).isEqualTo(msgpack);
    assertThat(packed.upstreamRequest().headers().get("content-length")).contains(Integer.toString(msgpack.length));

    String broken = "{\"stream\":true,\"messages\":[}";
    ExchangeResult malformed = Flows.run(service.envoy,
        Exchange.post(PATH, broken).requestHeader("x-disagg-phase", "generation").requestHeader("x-disagg-request-id", "m-2")
            .requestChunking(Chunking.fixed(4)).responseStatus(400).responseBody("{\"error\":\"bad json\"}"));
    assertClean(malformed);
    assertThat(malformed.upstreamRequest().bodyUtf8()).isEqualTo(broken);

    String notStreaming = vllmDecode("").replace("\"stream\":true", "\"stream\":false");
    ExchangeResult json = Flows.run(service.envoy,
        Exchange.post(PATH, notStreaming).requestHeader("x-request-id", "m-3")
            .responseHeader("content-type", "application/json").responseBody(Wire.chatCompletion("m-3", Wire.usage(5, 1, 5L))));
    assertClean(json);
    assertThat(json.upstreamRequest().bodyUtf8()).isEqualTo(notStreaming);

    assertThat(service.metrics.injectionCount(InjectionOutcome.MSGPACK)).isEqualTo(1);
    assertThat(service.metrics.injectionCount(InjectionOutcome.MALFORMED)).isEqualTo(1);
    assertThat(service.metrics.injectionCount(InjectionOutcome.NOT_STREAMING)).isEqualTo(1);
    assertThat(service.metrics.injectionCount(InjectionOutcome.INJECTED)).isZero();
  }

  @Test
  void withTheSettingOffNothingChanges() throws Exception {
    try (ServiceUnderTest off = new ServiceUnderTest(ServiceUnderTest.testConfig(Duration.ofMillis(1500)))) {
      String original = vllmDecode("");
      String answer = StreamingEngine.VLLM.chatStream(original, Wire.usage(1, 1, 1L), "Par", "is");
      ExchangeResult[] r = Flows.contextFirst(off.envoy,
          prefill("o-1", Wire.usage(1656, 1, 1024L)),
          leg(original, Chunking.fixed(7), answer, Chunking.fixed(13)).requestHeader("x-request-id", "o-1"));

      assertClean(r[1]);
      assertThat(r[1].upstreamRequest().bodyUtf8()).isEqualTo(original);
      assertThat(r[1].upstreamRequest().headers().get("content-length")).contains(Integer.toString(original.length()));
      assertThat(r[1].clientResponse().bodyUtf8()).isEqualTo(answer);
      assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("no_usage");
      for (InjectionOutcome outcome : InjectionOutcome.values()) {
        assertThat(off.metrics.injectionCount(outcome)).isZero();
      }
    }
  }
}
