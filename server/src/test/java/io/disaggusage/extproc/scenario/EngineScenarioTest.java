package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.OpenAiClientView;
import io.disaggusage.extproc.testkit.Wire;
import static io.disaggusage.extproc.testkit.EngineRequests.PATH;
import static io.disaggusage.extproc.testkit.EngineRequests.TRT_ID;
import static io.disaggusage.extproc.testkit.EngineRequests.TRT_RETRY_ID;
import static io.disaggusage.extproc.testkit.EngineRequests.trtRequest;
import static io.disaggusage.extproc.testkit.EngineRequests.vllmDecode;
import static io.disaggusage.extproc.testkit.EngineRequests.vllmPrefill;
import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.rewrite.Outcome;
import io.disaggusage.extproc.rewrite.Phase;
import io.disaggusage.extproc.testkit.OpenAiClientView.ClientUsage;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every engine vector of engines.md through the fake Envoy, each under many chunkings of the
 * generation response (whole, one byte at a time, fixed sizes, random splits with an empty final
 * chunk). The client-visible bytes must be exactly the expected ones, and the official OpenAI SDK
 * must read the corrected usage from them.
 */
class EngineScenarioTest extends ScenarioFixture {

  static Stream<Arguments> chunkings() {
    return Stream.of(
        Arguments.of("whole", Chunking.whole()),
        Arguments.of("bytewise", Chunking.bytewise()),
        Arguments.of("fixed-7", Chunking.fixed(7)),
        Arguments.of("fixed-64", Chunking.fixed(64)),
        Arguments.of("random-1+empty", Chunking.random(1, 40).withEmptyFinalChunk()),
        Arguments.of("random-2+empty", Chunking.random(2, 90).withEmptyFinalChunk()));
  }

  static Exchange.Builder ctxExchange(String requestBody, String responseBody) {
    return Exchange.post(PATH, requestBody)
        .responseHeader("content-type", "application/json")
        .responseBody(responseBody)
        .responseContentLength()
        .responseChunking(Chunking.fixed(33));
  }

  static Exchange.Builder genExchange(String requestBody, String contentType, String responseBody, Chunking chunking) {
    return Exchange.post(PATH, requestBody)
        .responseHeader("content-type", contentType)
        .responseBody(responseBody)
        .responseContentLength()
        .responseChunking(chunking);
  }

  static void assertRewritten(ExchangeResult gen, long prompt, long cached, long completion, long reportedCached) {
    assertClean(gen);
    assertThat(gen.accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("rewritten");
    assertThat(gen.accessLog("%DYNAMIC_METADATA(disagg_usage:prompt_tokens)%")).isEqualTo(Long.toString(prompt));
    assertThat(gen.accessLog("%DYNAMIC_METADATA(disagg_usage:cached_tokens)%")).isEqualTo(Long.toString(cached));
    assertThat(gen.accessLog("%DYNAMIC_METADATA(disagg_usage:completion_tokens)%")).isEqualTo(Long.toString(completion));
    assertThat(gen.accessLog("%DYNAMIC_METADATA(disagg_usage:total_tokens)%")).isEqualTo(Long.toString(prompt + completion));
    assertThat(gen.accessLog("%DYNAMIC_METADATA(disagg_usage:reported_cached_tokens)%"))
        .isEqualTo(Long.toString(reportedCached));
    // Envoy AI Gateway's key names carry the same, corrected numbers.
    assertThat(gen.accessLog("%DYNAMIC_METADATA(disagg_usage:llm_input_token)%")).isEqualTo(Long.toString(prompt));
    assertThat(gen.accessLog("%DYNAMIC_METADATA(disagg_usage:llm_cached_input_token)%")).isEqualTo(Long.toString(cached));
    assertThat(gen.accessLog("%DYNAMIC_METADATA(disagg_usage:llm_output_token)%")).isEqualTo(Long.toString(completion));
    assertThat(gen.accessLog("%DYNAMIC_METADATA(disagg_usage:llm_total_token)%")).isEqualTo(Long.toString(prompt + completion));
  }

  // ------------------------------------------------------------------------------------------
  // TensorRT-LLM

  /** G6: trtllm-serve context_first, non-streaming. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("chunkings")
  void trtContextFirstJson(String name, Chunking chunking) throws Exception {
    String ctxUsage = "{\"prompt_tokens\":101,\"completion_tokens\":1,\"total_tokens\":102,\"prompt_tokens_details\":{\"cached_tokens\":7}}";
    String genUsage = "{\"prompt_tokens\":101,\"completion_tokens\":13,\"total_tokens\":114,\"prompt_tokens_details\":{\"cached_tokens\":101}}";
    String genBody = Wire.chatCompletion("gen", genUsage);
    ExchangeResult[] r =
        Flows.contextFirst(
            service.envoy,
            ctxExchange(
                trtRequest("context_only", ",\"disagg_request_id\":" + TRT_ID + ",\"schedule_style\":0"),
                Wire.trtContextResponse(TRT_ID, TRT_ID, ctxUsage)),
            genExchange(
                trtRequest("generation_only", ",\"ctx_request_id\":" + TRT_ID + ",\"disagg_request_id\":" + TRT_ID + ",\"schedule_style\":0"),
                "application/json",
                genBody,
                chunking));
    assertClean(r[0]);
    assertThat(r[0].clientResponse().bodyUtf8()).isEqualTo(Wire.trtContextResponse(TRT_ID, TRT_ID, ctxUsage));
    assertThat(r[1].clientResponse().bodyUtf8())
        .isEqualTo(genBody.replace("{\"cached_tokens\":101}", "{\"cached_tokens\":7}"));
    assertThat(OpenAiClientView.chatCompletion(r[1].clientResponse().bodyUtf8()))
        .isEqualTo(new ClientUsage(101, 7L, 13, 114));
    assertRewritten(r[1], 101, 7, 13, 101);
    assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:corrected)%")).isEqualTo("true");
    assertThat(service.store.size()).isZero();
  }

  /** G7: streaming, context_first. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("chunkings")
  void trtContextFirstStream(String name, Chunking chunking) throws Exception {
    String ctxUsage = "{\"prompt_tokens\":128,\"completion_tokens\":0,\"total_tokens\":128,\"prompt_tokens_details\":{\"cached_tokens\":9}}";
    String genUsage = "{\"prompt_tokens\":128,\"completion_tokens\":5,\"total_tokens\":133,\"prompt_tokens_details\":{\"cached_tokens\":128}}";
    String stream = Wire.chatStream(genUsage, "Par", "is", " is", " the", " capital");
    ExchangeResult[] r =
        Flows.contextFirst(
            service.envoy,
            ctxExchange(
                trtRequest("context_only", ",\"disagg_request_id\":" + TRT_ID),
                Wire.trtContextResponse(TRT_ID, TRT_ID, ctxUsage)),
            genExchange(
                trtRequest("generation_only", ",\"ctx_request_id\":" + TRT_ID + ",\"disagg_request_id\":" + TRT_ID),
                "text/event-stream",
                stream,
                chunking));
    assertThat(r[1].clientResponse().bodyUtf8())
        .isEqualTo(stream.replace("{\"cached_tokens\":128}", "{\"cached_tokens\":9}"));
    assertThat(OpenAiClientView.chatStream(r[1].clientResponse().bodyUtf8()))
        .isEqualTo(new ClientUsage(128, 9L, 5, 133));
    assertRewritten(r[1], 128, 9, 5, 128);
  }

  /**
   * TensorRT-LLM's own framing: the first chunk as {@code data: {…} \n\n} (a space before the blank
   * line), CRLF line ends from an intermediary, and a trailing {@code event: trtllm.perf_metrics}.
   */
  @ParameterizedTest(name = "{0}")
  @MethodSource("chunkings")
  void trtFramingCrlfAndPerfMetrics(String name, Chunking chunking) throws Exception {
    String ctxUsage = Wire.usage(128, 1, 9L);
    String stream =
        (Wire.chunk("Par").replace("}\n\n", "} \n\n")
                + Wire.chunk("is")
                + Wire.usageChunk(Wire.usage(128, 2, 128L))
                + Wire.DONE
                + "event: trtllm.perf_metrics\ndata: {\"ctx_server\":\"h:1\",\"usage\":\"n/a\"}\n\n")
            .replace("\n", "\r\n");
    ExchangeResult[] r =
        Flows.contextFirst(
            service.envoy,
            ctxExchange(
                trtRequest("context_only", ",\"disagg_request_id\":" + TRT_ID),
                Wire.trtContextResponse(TRT_ID, TRT_ID, ctxUsage)),
            genExchange(
                trtRequest("generation_only", ",\"ctx_request_id\":" + TRT_ID),
                "text/event-stream; charset=utf-8",
                stream,
                chunking));
    assertThat(r[1].clientResponse().bodyUtf8())
        .isEqualTo(stream.replace("{\"cached_tokens\":128}", "{\"cached_tokens\":9}"));
    assertThat(OpenAiClientView.dataPayloads(r[1].clientResponse().bodyUtf8()))
        .contains("{\"ctx_server\":\"h:1\",\"usage\":\"n/a\"}");
    assertRewritten(r[1], 128, 9, 2, 128);
  }

  /** G7 with schedule_style generation_first: the whole generation stream passes before the context. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("chunkings")
  void trtGenerationFirstStream(String name, Chunking chunking) throws Exception {
    String ctxUsage = "{\"prompt_tokens\":128,\"completion_tokens\":1,\"total_tokens\":129,\"prompt_tokens_details\":{\"cached_tokens\":9}}";
    String genUsage = "{\"prompt_tokens\":128,\"completion_tokens\":5,\"total_tokens\":133,\"prompt_tokens_details\":{\"cached_tokens\":128}}";
    String stream = Wire.chatStream(genUsage, "Par", "is");
    ExchangeResult[] r =
        Flows.generationFirst(
            service.envoy,
            ctxExchange(
                trtRequest("context_only", ",\"disagg_request_id\":" + TRT_ID + ",\"schedule_style\":1"),
                Wire.trtContextResponse(TRT_ID, TRT_ID, ctxUsage)),
            genExchange(
                trtRequest("generation_only", ",\"ctx_request_id\":" + TRT_ID + ",\"disagg_request_id\":" + TRT_ID + ",\"schedule_style\":1"),
                "text/event-stream",
                stream,
                chunking));
    assertThat(r[1].clientResponse().bodyUtf8())
        .isEqualTo(stream.replace("{\"cached_tokens\":128}", "{\"cached_tokens\":9}"));
    assertRewritten(r[1], 128, 9, 5, 128);
    assertThat(service.store.waiters()).isZero();
  }

  /** generation_first, non-streaming: the JSON body ends before the context response does. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("chunkings")
  void trtGenerationFirstJson(String name, Chunking chunking) throws Exception {
    String ctxUsage = Wire.usage(101, 1, 7L);
    String genBody = Wire.chatCompletion("gen", Wire.usage(101, 13, 101L));
    ExchangeResult[] r =
        Flows.generationFirst(
            service.envoy,
            ctxExchange(
                trtRequest("context_only", ",\"disagg_request_id\":" + TRT_ID + ",\"schedule_style\":1"),
                Wire.trtContextResponse(TRT_ID, TRT_ID, ctxUsage)),
            genExchange(
                trtRequest("generation_only", ",\"ctx_request_id\":" + TRT_ID + ",\"schedule_style\":1"),
                "application/json",
                genBody,
                chunking));
    assertThat(OpenAiClientView.chatCompletion(r[1].clientResponse().bodyUtf8()))
        .isEqualTo(new ClientUsage(101, 7L, 13, 114));
    assertRewritten(r[1], 101, 7, 13, 101);
  }

  /** A retried context call gets a new disagg_request_id; the generation carries the successful ctx id. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("chunkings")
  void trtRetriedContextCall(String name, Chunking chunking) throws Exception {
    ExchangeResult failed =
        Flows.run(
            service.envoy,
            Exchange.post(PATH, trtRequest("context_only", ",\"disagg_request_id\":" + TRT_ID))
                .responseStatus(503)
                .responseHeader("content-type", "application/json")
                .responseBody("{\"error\":\"busy\"}"));
    assertClean(failed);
    String ctxUsage = Wire.usage(64, 1, 32L);
    Flows.run(
        service.envoy,
        ctxExchange(
            trtRequest("context_only", ",\"disagg_request_id\":" + TRT_RETRY_ID),
            Wire.trtContextResponse(TRT_RETRY_ID, TRT_RETRY_ID, ctxUsage)));
    String genBody = Wire.chatCompletion("g", Wire.usage(64, 10, 64L));
    ExchangeResult gen =
        Flows.run(
            service.envoy,
            genExchange(
                trtRequest("generation_only", ",\"ctx_request_id\":" + TRT_RETRY_ID + ",\"disagg_request_id\":" + TRT_ID),
                "application/json",
                genBody,
                chunking));
    assertThat(OpenAiClientView.chatCompletion(gen.clientResponse().bodyUtf8()))
        .isEqualTo(new ClientUsage(64, 32L, 10, 74));
    assertRewritten(gen, 64, 32, 10, 64);
  }

  /** G8: a newer orchestrator puts the context usage into the generation request itself. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("chunkings")
  void trtCtxUsageCarriedInGenerationRequest(String name, Chunking chunking) throws Exception {
    String stream = Wire.chatStream(Wire.usage(10, 3, 10L), "a", "b");
    ExchangeResult gen =
        Flows.run(
            service.envoy,
            genExchange(
                trtRequest(
                    "generation_only",
                    ",\"ctx_request_id\":1,\"ctx_usage\":{\"prompt_tokens\":10,\"completion_tokens\":0,\"total_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":4}}"),
                "text/event-stream",
                stream,
                chunking));
    assertThat(OpenAiClientView.chatStream(gen.clientResponse().bodyUtf8()))
        .isEqualTo(new ClientUsage(10, 4L, 3, 13));
    assertRewritten(gen, 10, 4, 3, 10);
  }

  // ------------------------------------------------------------------------------------------
  // vLLM family and llm-d

  /** G9a: vLLM toy proxy, X-Request-Id on both legs, non-streaming. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("chunkings")
  void vllmProxyJson(String name, Chunking chunking) throws Exception {
    String genBody = Wire.chatCompletion("r-9", Wire.usage(999, 8, 999L));
    ExchangeResult[] r =
        Flows.contextFirst(
            service.envoy,
            ctxExchange(vllmPrefill(), Wire.chatCompletion("r-9", Wire.usage(186, 1, 64L))).requestHeader("x-request-id", "r-9"),
            genExchange(vllmDecode(false), "application/json", genBody, chunking).requestHeader("x-request-id", "r-9"));
    assertThat(r[1].clientResponse().bodyUtf8())
        .isEqualTo(
            genBody.replace(
                Wire.usage(999, 8, 999L),
                "{\"prompt_tokens\":186,\"completion_tokens\":8,\"total_tokens\":194,\"prompt_tokens_details\":{\"cached_tokens\":64}}"));
    assertThat(OpenAiClientView.chatCompletion(r[1].clientResponse().bodyUtf8()))
        .isEqualTo(new ClientUsage(186, 64L, 8, 194));
    assertRewritten(r[1], 186, 64, 8, 999);
  }

  /** vLLM continuous usage: every chunk carries usage (prompt − 1 cached), every one is corrected. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("chunkings")
  void vllmContinuousUsageStream(String name, Chunking chunking) throws Exception {
    StringBuilder stream = new StringBuilder();
    for (int i = 1; i <= 4; i++) {
      stream.append(
          "data: {\"id\":\"chatcmpl-r\",\"object\":\"chat.completion.chunk\",\"created\":1764400000,\"model\":\"" + Wire.MODEL
              + "\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t" + i + "\"},\"logprobs\":null,\"finish_reason\":null}],"
              + "\"usage\":{\"prompt_tokens\":1656,\"total_tokens\":" + (1656 + i) + ",\"completion_tokens\":" + i
              + ",\"prompt_tokens_details\":{\"cached_tokens\":1655}}}\n\n");
    }
    stream.append(Wire.usageChunk(Wire.usage(1656, 4, 1655L))).append(Wire.DONE);
    ExchangeResult[] r =
        Flows.contextFirst(
            service.envoy,
            ctxExchange(vllmPrefill(), Wire.chatCompletion("r", Wire.usage(1656, 1, 1024L))).requestHeader("x-request-id", "r-c"),
            genExchange(vllmDecode(true), "text/event-stream", stream.toString(), chunking).requestHeader("x-request-id", "r-c"));
    assertThat(r[1].clientResponse().bodyUtf8())
        .isEqualTo(stream.toString().replace("{\"cached_tokens\":1655}", "{\"cached_tokens\":1024}"));
    assertThat(OpenAiClientView.chatStreamUsages(r[1].clientResponse().bodyUtf8()))
        .hasSize(5)
        .allSatisfy(u -> assertThat(u.cached()).isEqualTo(1024L));
    assertRewritten(r[1], 1656, 1024, 4, 1655);
  }

  /** G11: llm-d sidecar legs (x-request-id), the decode stream split as "da" + "ta: …". */
  @ParameterizedTest(name = "{0}")
  @MethodSource("chunkings")
  void llmdSidecarStream(String name, Chunking chunking) throws Exception {
    String stream = Wire.chatStream("{\"prompt_tokens\":64,\"completion_tokens\":2,\"total_tokens\":66,\"prompt_tokens_details\":{\"cached_tokens\":49}}", "x");
    Chunking split = name.equals("whole") ? Chunking.at(2) : chunking;
    ExchangeResult[] r =
        Flows.contextFirst(
            service.envoy,
            ctxExchange(vllmPrefill(), Wire.chatCompletion("u", Wire.usage(64, 1, 8L))).requestHeader("x-request-id", "uuid-7"),
            genExchange(vllmDecode(true), "text/event-stream", stream, split).requestHeader("x-request-id", "uuid-7"));
    assertThat(r[1].clientResponse().bodyUtf8()).isEqualTo(stream.replace("{\"cached_tokens\":49}", "{\"cached_tokens\":8}"));
    assertRewritten(r[1], 64, 8, 2, 49);
  }

  /**
   * G10 and G9c (vllm-project/router vectors) through Envoy: sibling detail keys and unknown usage keys
   * survive; null details are created; a context worker without details means zero cached.
   */
  @ParameterizedTest(name = "{0}")
  @MethodSource("chunkings")
  void vllmRouterSiblingsNullDetailsAndMissingContextDetails(String name, Chunking chunking) throws Exception {
    String siblings =
        "{\"prompt_tokens\":100,\"completion_tokens\":20,\"total_tokens\":120,\"prompt_tokens_details\":{\"cached_tokens\":100,\"audio_tokens\":2},\"future_field\":7}";
    String nullDetails = "{\"prompt_tokens\":100,\"completion_tokens\":20,\"total_tokens\":120,\"prompt_tokens_details\":null}";
    String g9c = "{\"prompt_tokens\":10,\"completion_tokens\":2,\"total_tokens\":12,\"prompt_tokens_details\":{\"cached_tokens\":10}}";
    String[][] cases = {
      {"s", Wire.usage(100, 1, 64L), siblings,
          "{\"prompt_tokens\":100,\"completion_tokens\":20,\"total_tokens\":120,\"prompt_tokens_details\":{\"cached_tokens\":64,\"audio_tokens\":2},\"future_field\":7}"},
      {"n", Wire.usage(100, 1, 0L), nullDetails,
          "{\"prompt_tokens\":100,\"completion_tokens\":20,\"total_tokens\":120,\"prompt_tokens_details\":{\"cached_tokens\":0}}"},
      {"c", Wire.usage(10, 1, null), g9c,
          "{\"prompt_tokens\":10,\"completion_tokens\":2,\"total_tokens\":12,\"prompt_tokens_details\":{\"cached_tokens\":0}}"},
    };
    for (String[] c : cases) {
      String genBody = Wire.chatCompletion(c[0], c[2]);
      ExchangeResult[] r =
          Flows.contextFirst(
              service.envoy,
              ctxExchange(vllmPrefill(), Wire.chatCompletion(c[0], c[1])).requestHeader("x-request-id", "router-" + c[0]),
              genExchange(vllmDecode(false), "application/json", genBody, chunking).requestHeader("x-request-id", "router-" + c[0]));
      assertClean(r[1]);
      assertThat(r[1].clientResponse().bodyUtf8()).as(c[0]).isEqualTo(genBody.replace(c[2], c[3]));
      OpenAiClientView.chatCompletion(r[1].clientResponse().bodyUtf8());
    }
  }

  // ------------------------------------------------------------------------------------------
  // SGLang

  /** SGLang: identical bodies on both legs, told apart only by the Envoy cluster; dispatched together. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("chunkings")
  void sglangIdenticalBodiesByCluster(String name, Chunking chunking) throws Exception {
    String body =
        "{\"model\":\"" + Wire.MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true,"
            + "\"stream_options\":{\"include_usage\":true},\"bootstrap_host\":\"10.1.0.5\",\"bootstrap_port\":8998,"
            + "\"bootstrap_room\":9223372036854775806}";
    String ctxStream = Wire.chatStream(Wire.usage(300, 1, 256L), "H");
    String genStream = Wire.chatStream(Wire.usage(300, 20, 300L), "H", "ello");
    ExchangeResult[] r =
        Flows.generationFirst(
            service.envoy,
            Exchange.post(PATH, body)
                .requestAttribute("xds.cluster_name", ServiceUnderTest.CONTEXT_CLUSTER)
                .responseHeader("content-type", "text/event-stream")
                .responseBody(ctxStream)
                .responseChunking(Chunking.fixed(50)),
            genExchange(body, "text/event-stream", genStream, chunking)
                .requestAttribute("xds.cluster_name", ServiceUnderTest.GENERATION_CLUSTER));
    assertThat(r[0].clientResponse().bodyUtf8()).isEqualTo(ctxStream);
    assertThat(r[1].clientResponse().bodyUtf8()).isEqualTo(genStream.replace("{\"cached_tokens\":300}", "{\"cached_tokens\":256}"));
    assertRewritten(r[1], 300, 256, 20, 300);
  }

  // ------------------------------------------------------------------------------------------
  // Responses API and completions

  /** G9b: the Responses API, JSON. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("chunkings")
  void responsesApiJson(String name, Chunking chunking) throws Exception {
    String genUsage = "{\"input_tokens\":98,\"output_tokens\":8,\"total_tokens\":106,\"input_tokens_details\":{\"cached_tokens\":98},\"output_tokens_details\":{\"reasoning_tokens\":3}}";
    String ctxUsage = "{\"input_tokens\":98,\"output_tokens\":1,\"total_tokens\":99,\"input_tokens_details\":{\"cached_tokens\":32},\"output_tokens_details\":{\"reasoning_tokens\":0}}";
    ExchangeResult[] r =
        Flows.contextFirst(
            service.envoy,
            Exchange.post("/v1/responses", "{\"model\":\"m\",\"input\":\"hi\",\"kv_transfer_params\":{\"do_remote_decode\":true}}")
                .requestHeader("x-request-id", "resp-1")
                .responseHeader("content-type", "application/json")
                .responseBody(Wire.response(ctxUsage)),
            Exchange.post("/v1/responses", "{\"model\":\"m\",\"input\":\"hi\",\"kv_transfer_params\":{\"do_remote_prefill\":true}}")
                .requestHeader("x-request-id", "resp-1")
                .responseHeader("content-type", "application/json")
                .responseBody(Wire.response(genUsage))
                .responseContentLength()
                .responseChunking(chunking));
    assertThat(OpenAiClientView.response(r[1].clientResponse().bodyUtf8())).isEqualTo(new ClientUsage(98, 32L, 8, 106));
    assertRewritten(r[1], 98, 32, 8, 98);
  }

  /** The Responses API stream: named events, usage inside response.completed, no [DONE]. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("chunkings")
  void responsesApiStream(String name, Chunking chunking) throws Exception {
    String genUsage = "{\"input_tokens\":98,\"output_tokens\":8,\"total_tokens\":106,\"input_tokens_details\":{\"cached_tokens\":98},\"output_tokens_details\":{\"reasoning_tokens\":3}}";
    String ctxUsage = "{\"input_tokens\":98,\"output_tokens\":1,\"total_tokens\":99,\"input_tokens_details\":{\"cached_tokens\":32},\"output_tokens_details\":{\"reasoning_tokens\":0}}";
    String stream = Wire.responseStream(genUsage);
    ExchangeResult[] r =
        Flows.contextFirst(
            service.envoy,
            Exchange.post("/v1/responses", "{\"model\":\"m\",\"input\":\"hi\"}")
                .requestHeader("x-disagg-phase", "prefill")
                .requestHeader("x-disagg-request-id", "resp-2")
                .responseHeader("content-type", "application/json")
                .responseBody(Wire.response(ctxUsage)),
            Exchange.post("/v1/responses", "{\"model\":\"m\",\"input\":\"hi\",\"stream\":true}")
                .requestHeader("x-disagg-phase", "decode")
                .requestHeader("x-disagg-request-id", "resp-2")
                .responseHeader("content-type", "text/event-stream")
                .responseBody(stream)
                .responseChunking(chunking));
    assertThat(r[1].clientResponse().bodyUtf8()).isEqualTo(stream.replace("{\"cached_tokens\":98}", "{\"cached_tokens\":32}"));
    assertThat(OpenAiClientView.responseStream(r[1].clientResponse().bodyUtf8())).isEqualTo(new ClientUsage(98, 32L, 8, 106));
    assertRewritten(r[1], 98, 32, 8, 98);
  }

  /** Legacy /v1/completions. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("chunkings")
  void legacyCompletions(String name, Chunking chunking) throws Exception {
    ExchangeResult[] r =
        Flows.contextFirst(
            service.envoy,
            Exchange.post("/v1/completions", "{\"model\":\"m\",\"prompt\":\"x\",\"kv_transfer_params\":{\"do_remote_decode\":true}}")
                .requestHeader("x-request-id", "c-1")
                .responseHeader("content-type", "application/json")
                .responseBody(Wire.completion(Wire.usage(17, 1, null))),
            Exchange.post("/v1/completions", "{\"model\":\"m\",\"prompt\":\"x\",\"kv_transfer_params\":{\"do_remote_prefill\":true}}")
                .requestHeader("x-request-id", "c-1")
                .responseHeader("content-type", "application/json")
                .responseBody(Wire.completion(Wire.usage(17, 16, 17L)))
                .responseContentLength()
                .responseChunking(chunking));
    // An older vLLM context worker omits details when nothing was cached: cached is 0 (§2).
    assertThat(OpenAiClientView.completion(r[1].clientResponse().bodyUtf8())).isEqualTo(new ClientUsage(17, 0L, 16, 33));
    assertRewritten(r[1], 17, 0, 16, 17);
    assertThat(service.metrics.exchangeCount(Phase.GENERATION, Outcome.REWRITTEN)).isEqualTo(1);
    assertThat(service.metrics.exchangeCount(Phase.CONTEXT, Outcome.STORED)).isEqualTo(1);
  }
}
