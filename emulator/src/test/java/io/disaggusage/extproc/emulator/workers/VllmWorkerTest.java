package io.disaggusage.extproc.emulator.workers;

import static io.disaggusage.extproc.emulator.workers.WorkerCalls.LONG_PROMPT;
import static io.disaggusage.extproc.emulator.workers.WorkerCalls.chat;
import static io.disaggusage.extproc.emulator.workers.WorkerCalls.completion;
import static io.disaggusage.extproc.emulator.workers.WorkerCalls.events;
import static io.disaggusage.extproc.emulator.workers.WorkerCalls.json;
import static io.disaggusage.extproc.emulator.workers.WorkerCalls.post;
import static io.disaggusage.extproc.emulator.workers.WorkerCalls.postCompletion;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.disaggusage.extproc.emulator.engines.UsageVariant;
import java.util.List;
import org.junit.jupiter.api.Test;

/** vLLM prefill and decode workers (NIXL) over HTTP (engines.md §2). */
class VllmWorkerTest extends WorkerPairTest {
  private static final String PREFILL_PARAMS =
      "\"max_tokens\":1,\"stream\":false,\"kv_transfer_params\":{\"do_remote_decode\":true,\"do_remote_prefill\":false,"
          + "\"remote_engine_id\":null,\"remote_block_ids\":null,\"remote_host\":null,\"remote_port\":null}";
  private static final String REQUEST_ID = "0b7e2f1c-3d4a-4e5f-8a9b-0c1d2e3f4a5b";

  VllmWorkerTest() {
    super(EngineKind.VLLM);
  }

  /** Prefills twice (the second hits the cache) and returns the second prefill reply. */
  private JsonNode warmPrefill() throws Exception {
    post(prefill, chat(LONG_PROMPT, PREFILL_PARAMS), "X-Request-Id", "warm");
    return json(post(prefill, chat(LONG_PROMPT, PREFILL_PARAMS), "X-Request-Id", REQUEST_ID).body());
  }

  private JsonNode decodeUsage(JsonNode prefilled, String extra) throws Exception {
    String body = chat(LONG_PROMPT, "\"kv_transfer_params\":" + prefilled.path("kv_transfer_params") + "," + extra);
    return json(post(decode, body, "X-Request-Id", REQUEST_ID).body()).path("usage");
  }

  @Test
  void prefillAnswersOneTokenWithKvTransferParamsAndIsNamedAfterTheRequestId() throws Exception {
    start(UsageVariant.BUG);
    JsonNode reply = warmPrefill();
    assertThat(reply.path("id").asText()).isEqualTo("chatcmpl-" + REQUEST_ID);
    assertThat(reply.path("choices").path(0).path("finish_reason").asText()).isEqualTo("length");
    assertThat(reply.path("usage").path("completion_tokens").asLong()).isEqualTo(1);
    JsonNode params = reply.path("kv_transfer_params");
    assertThat(params.path("do_remote_prefill").asBoolean()).isTrue();
    assertThat(params.path("do_remote_decode").asBoolean()).isFalse();
    assertThat(params.path("remote_request_id").asText()).as("the response id and a suffix, as vLLM 0.32 writes it")
        .matches("chatcmpl-" + REQUEST_ID + "-[0-9a-f]{8}");
    assertThat(params.has("remote_prefill_cached_tokens")).as("only releases with #54222").isFalse();
    long prompt = reply.path("usage").path("prompt_tokens").asLong();
    long cached = cachedTokens(reply.path("usage"));
    assertThat(cached).isEqualTo(ownCacheHit(prompt));
    assertThat(reply.path("usage").path("prompt_tokens_details").path("created_cache_tokens").asLong())
        .as("the full blocks the prefill newly cached").isEqualTo(prompt / 16 * 16 - cached);
  }

  @Test
  void nixlBugReportsPromptMinusOneAndTheWholePromptVariantThePrompt() throws Exception {
    start(UsageVariant.BUG);
    JsonNode usage = decodeUsage(warmPrefill(), "\"max_tokens\":4");
    assertThat(cachedTokens(usage)).isEqualTo(usage.path("prompt_tokens").asLong() - 1);
    start(UsageVariant.WHOLE_PROMPT_BUG);
    JsonNode whole = decodeUsage(warmPrefill(), "\"max_tokens\":4");
    assertThat(cachedTokens(whole)).isEqualTo(whole.path("prompt_tokens").asLong());
  }

  @Test
  void fixedDecodeReportsThePrefillsCountWhenTheProxyForwardsIt() throws Exception {
    start(UsageVariant.FIXED);
    JsonNode prefilled = warmPrefill();
    long prefillCached = cachedTokens(prefilled.path("usage"));
    assertThat(prefilled.path("kv_transfer_params").path("remote_prefill_cached_tokens").asLong()).isEqualTo(prefillCached);
    assertThat(cachedTokens(decodeUsage(prefilled, "\"max_tokens\":4")))
        .isEqualTo(prefillCached);
    String rebuilt = chat(LONG_PROMPT, "\"max_tokens\":4,\"kv_transfer_params\":{\"do_remote_prefill\":true}");
    JsonNode dropped = json(post(decode, rebuilt).body()).path("usage");
    assertThat(cachedTokens(dropped))
        .as("a proxy that rebuilds the params drops the count: vLLM 0.32 counts the whole prompt")
        .isEqualTo(dropped.path("prompt_tokens").asLong());
  }

  @Test
  void streamsUsageOnlyWithStreamOptionsAndContinuousUsageInEveryChunk() throws Exception {
    start(UsageVariant.BUG);
    JsonNode prefilled = warmPrefill();
    String params = "\"kv_transfer_params\":" + prefilled.path("kv_transfer_params");
    List<JsonNode> bare = events(post(decode, chat(LONG_PROMPT, params + ",\"max_tokens\":2,\"stream\":true")).body());
    assertThat(bare).hasSize(3).noneMatch(e -> e.has("usage"));
    List<JsonNode> optionsOnly =
        events(post(decode, chat(LONG_PROMPT, params + ",\"max_tokens\":2,\"stream\":true,\"stream_options\":{}")).body());
    assertThat(optionsOnly.get(optionsOnly.size() - 1).path("usage").path("completion_tokens").asLong())
        .as("StreamOptions.include_usage defaults to true once stream_options is sent")
        .isEqualTo(2);
    assertThat(bare.get(0).path("choices").path(0).path("delta").toString()).isEqualTo("{\"role\":\"assistant\",\"content\":\"\"}");
    List<JsonNode> continuous =
        events(post(decode, chat(LONG_PROMPT, params + ",\"max_tokens\":2,\"stream\":true,"
            + "\"stream_options\":{\"include_usage\":true,\"continuous_usage_stats\":true}")).body());
    assertThat(continuous).extracting(e -> e.path("usage").path("completion_tokens").asLong()).containsExactly(0L, 1L, 2L, 2L);
    assertThat(continuous.subList(0, continuous.size() - 1)).as("a running usage has no prompt details in vLLM 0.32")
        .noneMatch(e -> e.path("usage").has("prompt_tokens_details"));
    assertThat(continuous.get(continuous.size() - 1).path("usage").path("prompt_tokens_details").fieldNames())
        .toIterable().containsExactly("cached_tokens", "created_cache_tokens");
  }

  @Test
  void nChoicesAndMaxCompletionTokensWinOverMaxTokens() throws Exception {
    start(UsageVariant.BUG);
    JsonNode prefilled = warmPrefill();
    String body = chat(LONG_PROMPT, "\"kv_transfer_params\":" + prefilled.path("kv_transfer_params")
        + ",\"n\":2,\"max_tokens\":9,\"max_completion_tokens\":3");
    JsonNode reply = json(post(decode, body).body());
    assertThat(reply.path("choices")).hasSize(2);
    assertThat(reply.path("choices").path(1).path("index").asInt()).isEqualTo(1);
    assertThat(reply.path("usage").path("completion_tokens").asLong()).isEqualTo(6);
    List<JsonNode> stream = events(post(decode, body.replace("}]", "}],\"stream\":true,\"stream_options\":{\"include_usage\":true}"))
        .body());
    assertThat(stream).filteredOn(e -> !e.path("choices").isEmpty())
        .extracting(e -> e.path("choices").path(0).path("index").asInt())
        .containsExactly(0, 1, 0, 1, 0, 1, 0, 1);
    assertThat(stream.get(stream.size() - 1).path("usage").path("completion_tokens").asLong()).isEqualTo(6);
  }

  @Test
  void decodeServesARequestWithoutKvTransferParamsWholeOnItsOwnCache() throws Exception {
    start(UsageVariant.BUG);
    String plain = chat(LONG_PROMPT, "\"max_tokens\":4");
    JsonNode first = servedWhole(decode, plain, 4);
    long prompt = first.path("usage").path("prompt_tokens").asLong();
    List<JsonNode> repeat = events(post(decode, plain.replace("}]", "}],\"stream\":true,\"stream_options\":{\"include_usage\":true}")).body());
    JsonNode usage = repeat.get(repeat.size() - 1).path("usage");
    assertThat(cachedTokens(usage))
        .as("its own cache's hits, not the NIXL count").isEqualTo(ownCacheHit(prompt));
    assertRefused(decode, "do_remote_prefill", "a decode leg without the prefill's handoff is still refused");
  }

  /** SMG's connector-less vLLM mode: the prefill gets the client's body capped to one token, no transfer asked. */
  @Test
  void prefillServesARequestWithoutKvTransferParamsWholeOnItsOwnCache() throws Exception {
    start(UsageVariant.BUG);
    String plain = chat(LONG_PROMPT, "\"max_tokens\":1,\"stream\":false");
    JsonNode first = servedWhole(prefill, plain, 1);
    assertThat(first.path("kv_transfer_params").isNull()).as("no transfer asked, none offered").isTrue();
    long prompt = first.path("usage").path("prompt_tokens").asLong();
    JsonNode repeat = json(post(prefill, plain, "X-Request-Id", REQUEST_ID).body());
    assertThat(cachedTokens(repeat.path("usage")))
        .as("its own cache's hits").isEqualTo(ownCacheHit(prompt));
    assertRefused(prefill, "do_remote_decode", "a prefill leg that does not announce the remote decode is still refused");
  }

  /** {@code /v1/completions}: the same legs, vLLM 0.32's text_completion members, ids {@code cmpl-…}. */
  @Test
  void completionsAnswerInTheTextCompletionShape() throws Exception {
    start(UsageVariant.BUG);
    String prefillBody = completion(LONG_PROMPT, PREFILL_PARAMS);
    postCompletion(prefill, prefillBody, "X-Request-Id", "warm");
    JsonNode prefilled = json(postCompletion(prefill, prefillBody, "X-Request-Id", REQUEST_ID).body());
    assertThat(prefilled.path("id").asText()).isEqualTo("cmpl-" + REQUEST_ID);
    assertThat(prefilled.path("object").asText()).isEqualTo("text_completion");
    assertThat(fieldNames(prefilled)).containsExactly("id", "object", "created", "model", "choices", "service_tier",
        "system_fingerprint", "usage", "kv_transfer_params", "ec_transfer_params", "metrics");
    assertThat(fieldNames(prefilled.path("choices").get(0))).containsExactly("index", "text", "logprobs", "finish_reason",
        "stop_reason", "token_ids", "prompt_logprobs", "prompt_token_ids", "routed_experts");
    long prompt = prefilled.path("usage").path("prompt_tokens").asLong();
    assertThat(prompt).as("a begin marker and the prompt's words: no chat template")
        .isEqualTo(json(post(prefill, chat(LONG_PROMPT, PREFILL_PARAMS)).body()).path("usage").path("prompt_tokens").asLong() - 2);
    assertThat(prefilled.path("usage").path("prompt_tokens_details").toString())
        .isEqualTo("{\"cached_tokens\":" + ownCacheHit(prompt) + ",\"created_cache_tokens\":null,\"multimodal_tokens\":null}");
    assertThat(prefilled.path("kv_transfer_params").path("remote_request_id").asText()).startsWith("cmpl-" + REQUEST_ID + "-");

    String decodeBody = completion(LONG_PROMPT, "\"max_tokens\":3,\"stream\":true,\"stream_options\":{\"include_usage\":true},"
        + "\"kv_transfer_params\":" + prefilled.path("kv_transfer_params"));
    List<JsonNode> stream = events(postCompletion(decode, decodeBody, "X-Request-Id", REQUEST_ID).body());
    assertThat(stream).hasSize(4).allSatisfy(e -> assertThat(e.path("object").asText()).isEqualTo("text_completion"));
    assertThat(fieldNames(stream.get(0).path("choices").get(0))).as("no role chunk: text from the first")
        .containsExactly("index", "text", "logprobs", "finish_reason", "stop_reason", "prompt_token_ids", "token_ids");
    JsonNode usage = stream.get(3).path("usage");
    assertThat(usage.path("prompt_tokens_details").toString()).isEqualTo("{\"cached_tokens\":" + (prompt - 1) + "}");
    assertThat(usage.path("completion_tokens").asLong()).isEqualTo(3);
    assertThat(stream.get(3).path("system_fingerprint").isTextual()).isTrue();
  }

  /**
   * The answer of {@code worker} to a first request without {@code kv_transfer_params}, checked to be
   * served whole: its id from {@code X-Request-Id}, nothing cached yet, {@code maxTokens} produced.
   */
  private static JsonNode servedWhole(EngineWorker worker, String body, int maxTokens) throws Exception {
    JsonNode answer = json(post(worker, body, "X-Request-Id", REQUEST_ID).body());
    assertThat(answer.path("id").asText()).isEqualTo("chatcmpl-" + REQUEST_ID);
    assertThat(cachedTokens(answer.path("usage"))).as("nothing cached yet").isZero();
    assertThat(answer.path("usage").path("completion_tokens").asLong()).isEqualTo(maxTokens);
    return answer;
  }

  /** Asserts {@code worker} refuses (400) a leg whose {@code kv_transfer_params} sets {@code flag} false. */
  private static void assertRefused(EngineWorker worker, String flag, String why) throws Exception {
    assertThat(post(worker, chat(LONG_PROMPT, "\"kv_transfer_params\":{\"" + flag + "\":false}")).statusCode())
        .as(why).isEqualTo(400);
  }

  /** {@code usage.prompt_tokens_details.cached_tokens}, 0 when absent. */
  private static long cachedTokens(JsonNode usage) {
    return usage.path("prompt_tokens_details").path("cached_tokens").asLong();
  }

  /**
   * What a worker's own prefix cache holds of a prompt of {@code prompt} tokens it has seen before: its
   * full 16-token blocks, short of the last token, which is always computed.
   */
  private static long ownCacheHit(long prompt) {
    return (prompt - 1) / 16 * 16;
  }

  private static List<String> fieldNames(JsonNode node) {
    List<String> names = new java.util.ArrayList<>();
    node.fieldNames().forEachRemaining(names::add);
    return names;
  }

  @Test
  void recordsEveryHeaderValueAndTheBody() throws Exception {
    start(UsageVariant.BUG);
    String body = chat(LONG_PROMPT, PREFILL_PARAMS);
    post(prefill, body, "X-Request-Id", "first", "X-Request-Id", "second", "Authorization", "Bearer ");
    RecordedRequest recorded = prefill.log().completions().get(0);
    assertThat(recorded.method()).isEqualTo("POST");
    assertThat(recorded.path()).isEqualTo("/v1/chat/completions");
    assertThat(recorded.headerValues("x-request-id")).containsExactly("first", "second");
    assertThat(recorded.headerValues("Authorization")).containsExactly("Bearer");
    assertThat(recorded.bodyUtf8()).isEqualTo(body);
    assertThat(prefill.log().probes()).isEmpty();
  }
}
