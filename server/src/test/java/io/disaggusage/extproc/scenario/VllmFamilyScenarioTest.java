package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.EngineRequests;
import io.disaggusage.extproc.testkit.OpenAiClientView;
import io.disaggusage.extproc.testkit.Wire;
import static io.disaggusage.extproc.scenario.EngineScenarioTest.ctxExchange;
import static io.disaggusage.extproc.scenario.EngineScenarioTest.genExchange;
import static io.disaggusage.extproc.testkit.EngineRequests.trtRequest;
import static io.disaggusage.extproc.testkit.EngineRequests.vllmPrefill;
import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.testkit.OpenAiClientView.ClientUsage;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The vLLM family beyond the golden vectors (engines.md §2): engines that already report the right
 * count (vLLM ≥ 0.31 forwarding {@code remote_prefill_cached_tokens}, TensorRT-LLM with
 * {@code ctx_usage}) come out byte for byte as they were; vllm-ascend's "recomputed" flow — a second
 * P/D pair under a new request id for the same client request — gets each pair corrected by its own
 * prefill; null and extra detail keys survive in streams too.
 */
class VllmFamilyScenarioTest extends ScenarioFixture {
  static java.util.stream.Stream<org.junit.jupiter.params.provider.Arguments> chunkings() {
    return EngineScenarioTest.chunkings();
  }

  /** A decode request as vLLM ≥ 0.31's proxies forward it: P's params verbatim, count included. */
  static String decodeForwardingPrefillCount(boolean stream, long prefillCached) {
    return "{\"model\":\"" + Wire.MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":" + stream
        + (stream ? ",\"stream_options\":{\"include_usage\":true}" : "")
        + ",\"kv_transfer_params\":{\"do_remote_prefill\":true,\"do_remote_decode\":false,\"remote_block_ids\":[1,2],"
        + "\"remote_engine_id\":\"e\",\"remote_host\":\"10.0.0.2\",\"remote_port\":5600,\"remote_prefill_cached_tokens\":"
        + prefillCached + "}}";
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("chunkings")
  void vllmThatAlreadyForwardsThePrefillCountComesOutByteIdentical(String name, Chunking chunking) throws Exception {
    String stream = Wire.chatStream(Wire.usage(1656, 4, 1024L), "t1", "t2");
    ExchangeResult[] r =
        Flows.contextFirst(
            service.envoy,
            ctxExchange(vllmPrefill(), Wire.chatCompletion("r", Wire.usage(1656, 1, 1024L))).requestHeader("x-request-id", "fixed-1"),
            genExchange(decodeForwardingPrefillCount(true, 1024), "text/event-stream", stream, chunking)
                .requestHeader("x-request-id", "fixed-1"));
    assertClean(r[1]);
    assertThat(r[1].clientResponse().body()).isEqualTo(stream.getBytes(java.nio.charset.StandardCharsets.UTF_8));
    assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("rewritten");
    assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:corrected)%")).isEqualTo("false");
    assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:cached_tokens)%")).isEqualTo("1024");
    assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:reported_cached_tokens)%")).isEqualTo("1024");
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("chunkings")
  void tensorRtLlmThatCarriesCtxUsageAndAlreadyCorrectedComesOutByteIdentical(String name, Chunking chunking)
      throws Exception {
    String ctxUsage = Wire.usage(10, 0, 4L);
    String genBody = Wire.chatCompletion("g", Wire.usage(10, 7, 4L));
    ExchangeResult gen =
        Flows.run(
            service.envoy,
            genExchange(
                trtRequest("generation_only", ",\"ctx_request_id\":1,\"disagg_request_id\":1,\"ctx_usage\":" + ctxUsage),
                "application/json",
                genBody,
                chunking));
    assertClean(gen);
    assertThat(gen.clientResponse().bodyUtf8()).isEqualTo(genBody);
    assertThat(gen.accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("rewritten");
    assertThat(gen.accessLog("%DYNAMIC_METADATA(disagg_usage:corrected)%")).isEqualTo("false");
  }

  /**
   * vllm-ascend's recompute scheduler: the first decode ends with {@code stop_reason: "recomputed"},
   * the proxy runs a new P/D pair under a new X-Request-Id with prompt = original + generated text.
   * Each pair is one context-first flow to the service: each decode gets its own prefill's counts,
   * so the second pair reports its longer prompt and what the prefill cache really held for it.
   */
  @ParameterizedTest(name = "{0}")
  @MethodSource("chunkings")
  void ascendRecomputeFlowCorrectsEachPairWithItsOwnPrefill(String name, Chunking chunking) throws Exception {
    String first = Wire.chatStream(Wire.usage(500, 40, 500L), "a", "b").replace(
        "\"finish_reason\":null}]}\n\ndata: {\"id\":\"chatcmpl-g\",\"object\":\"chat.completion.chunk\",\"created\":1764400000,\"model\":\""
            + Wire.MODEL + "\",\"choices\":[]",
        "\"finish_reason\":\"stop\",\"stop_reason\":\"recomputed\"}]}\n\ndata: {\"id\":\"chatcmpl-g\",\"object\":\"chat.completion.chunk\",\"created\":1764400000,\"model\":\""
            + Wire.MODEL + "\",\"choices\":[]");
    assertThat(first).contains("\"stop_reason\":\"recomputed\"");
    String second = Wire.chatStream(Wire.usage(540, 60, 540L), "c");
    ExchangeResult[] pair1 =
        Flows.contextFirst(
            service.envoy,
            ctxExchange(vllmPrefill(), Wire.chatCompletion("p1", Wire.usage(500, 1, 0L))).requestHeader("x-request-id", "uuid-a"),
            genExchange(EngineRequests.vllmDecode(true), "text/event-stream", first, chunking)
                .requestHeader("x-request-id", "uuid-a"));
    ExchangeResult[] pair2 =
        Flows.contextFirst(
            service.envoy,
            ctxExchange(vllmPrefill(), Wire.chatCompletion("p2", Wire.usage(540, 1, 496L))).requestHeader("x-request-id", "uuid-b"),
            genExchange(EngineRequests.vllmDecode(true), "text/event-stream", second, chunking)
                .requestHeader("x-request-id", "uuid-b"));
    assertThat(pair1[1].clientResponse().bodyUtf8()).isEqualTo(first.replace("{\"cached_tokens\":500}", "{\"cached_tokens\":0}"));
    assertThat(pair2[1].clientResponse().bodyUtf8()).isEqualTo(second.replace("{\"cached_tokens\":540}", "{\"cached_tokens\":496}"));
    assertThat(OpenAiClientView.chatStreamUsages(pair2[1].clientResponse().bodyUtf8()))
        .containsExactly(new ClientUsage(540, 496L, 60, 600));
  }

  /** {@code prompt_tokens_details: null} and unknown detail keys in a stream's usage events. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("chunkings")
  void nullAndExtraDetailKeysInAStream(String name, Chunking chunking) throws Exception {
    String nullDetails = "{\"prompt_tokens\":100,\"completion_tokens\":20,\"total_tokens\":120,\"prompt_tokens_details\":null}";
    String extras = "{\"prompt_tokens\":100,\"completion_tokens\":21,\"total_tokens\":121,"
        + "\"prompt_tokens_details\":{\"audio_tokens\":2,\"cached_tokens\":100,\"image_tokens\":9},\"completion_tokens_details\":{\"reasoning_tokens\":5}}";
    String stream = Wire.chunk("x") + Wire.usageChunk(nullDetails).replace("\"choices\":[]", "\"choices\":[{\"index\":0,\"delta\":{}}]")
        + Wire.usageChunk(extras) + Wire.DONE;
    ExchangeResult[] r =
        Flows.contextFirst(
            service.envoy,
            ctxExchange(vllmPrefill(), Wire.chatCompletion("d", Wire.usage(100, 1, 64L))).requestHeader("x-request-id", "details"),
            genExchange(EngineRequests.vllmDecode(true), "text/event-stream", stream, chunking)
                .requestHeader("x-request-id", "details"));
    assertThat(r[1].clientResponse().bodyUtf8())
        .isEqualTo(stream
            .replace("\"prompt_tokens_details\":null", "\"prompt_tokens_details\":{\"cached_tokens\":64}")
            .replace("\"cached_tokens\":100,", "\"cached_tokens\":64,"));
    assertThat(OpenAiClientView.chatStreamUsages(r[1].clientResponse().bodyUtf8()))
        .containsExactly(new ClientUsage(100, 64L, 20, 120), new ClientUsage(100, 64L, 21, 121));
  }
}
