package io.disaggusage.extproc.emulator.workers;

import static io.disaggusage.extproc.emulator.workers.WorkerCalls.LONG_PROMPT;
import static io.disaggusage.extproc.emulator.workers.WorkerCalls.chat;
import static io.disaggusage.extproc.emulator.workers.WorkerCalls.events;
import static io.disaggusage.extproc.emulator.workers.WorkerCalls.json;
import static io.disaggusage.extproc.emulator.workers.WorkerCalls.post;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.emulator.engines.UsageVariant;
import io.disaggusage.extproc.testkit.MsgpackBodies;
import java.net.http.HttpResponse;
import java.util.List;
import org.junit.jupiter.api.Test;

/** TensorRT-LLM context and generation workers over HTTP (engines.md §1). */
class TrtLlmWorkerTest extends WorkerPairTest {
  private static final String CONTEXT_PARAMS =
      "\"disaggregated_params\":{\"request_type\":\"context_only\",\"disagg_request_id\":2748779069441234567,\"schedule_style\":0}";

  TrtLlmWorkerTest() {
    super(EngineKind.TRTLLM);
  }

  /** The context reply, then the generation request the context-first orchestrator builds from it. */
  private static String generationBody(JsonNode ctx, String extra, boolean forwardUsage) {
    ObjectNode params = ((ObjectNode) ctx.path("choices").path(0).path("disaggregated_params")).deepCopy();
    params.put("request_type", "generation_only").put("schedule_style", 0);
    if (forwardUsage) {
      params.set("ctx_usage", ctx.path("usage"));
    }
    return chat(LONG_PROMPT, "\"prompt_token_ids\":" + ctx.path("prompt_token_ids") + ",\"disaggregated_params\":" + params
        + (extra.isEmpty() ? "" : "," + extra));
  }

  @Test
  void contextWorkerAnswersOneTokenWithTheHandoffAndItsOwnCacheCount() throws Exception {
    start(UsageVariant.BUG);
    String body = chat(LONG_PROMPT, "\"max_tokens\":32,\"stream\":false," + CONTEXT_PARAMS);
    JsonNode first = json(post(prefill, body).body());
    HttpResponse<String> again = post(prefill, body);
    JsonNode second = json(again.body());
    assertThat(again.headers().firstValue("content-type")).hasValue("application/json");
    assertThat(again.headers().firstValueAsLong("content-length")).hasValue(again.body().length());
    JsonNode handoff = second.path("choices").path(0).path("disaggregated_params");
    assertThat(handoff.path("request_type").asText()).isEqualTo("context_only");
    assertThat(handoff.path("ctx_request_id").asLong()).isEqualTo(2748779069441234567L);
    assertThat(handoff.path("disagg_request_id").asLong()).isEqualTo(2748779069441234567L);
    assertThat(handoff.path("first_gen_tokens")).hasSize(1);
    assertThat(handoff.path("encoded_opaque_state").asText()).isNotEmpty();
    assertThat(second.path("choices").path(0).path("finish_reason").asText()).isEqualTo("length");
    long prompt = second.path("usage").path("prompt_tokens").asLong();
    assertThat(second.path("prompt_token_ids")).hasSize((int) prompt);
    assertThat(second.path("usage").path("completion_tokens").asLong()).isEqualTo(1);
    assertThat(first.path("usage").path("prompt_tokens_details").path("cached_tokens").asLong()).isZero();
    assertThat(second.path("usage").path("prompt_tokens_details").path("cached_tokens").asLong()).isEqualTo((prompt - 1) / 16 * 16);
  }

  @Test
  void buggyGenerationReportsTheWholePromptAsCached() throws Exception {
    start(UsageVariant.BUG);
    JsonNode ctx = json(post(prefill, chat(LONG_PROMPT, "\"max_tokens\":5," + CONTEXT_PARAMS)).body());
    JsonNode gen = json(post(decode, generationBody(ctx, "\"max_tokens\":5", false)).body());
    long prompt = ctx.path("usage").path("prompt_tokens").asLong();
    assertThat(gen.path("usage").path("prompt_tokens").asLong()).isEqualTo(prompt);
    assertThat(gen.path("usage").path("completion_tokens").asLong()).isEqualTo(5);
    assertThat(gen.path("usage").path("total_tokens").asLong()).isEqualTo(prompt + 5);
    assertThat(gen.path("usage").path("prompt_tokens_details").path("cached_tokens").asLong()).isEqualTo(prompt);
  }

  /** G6 through #14177's ctx_usage: the fixed generation worker reports the context's figures. */
  @Test
  void fixedGenerationTakesPromptAndCachedFromCtxUsage() throws Exception {
    start(UsageVariant.FIXED);
    JsonNode ctx = json(post(prefill, chat(LONG_PROMPT, "\"max_tokens\":13," + CONTEXT_PARAMS)).body());
    ObjectNode g6 = (ObjectNode) ctx.deepCopy();
    g6.set("usage", json("{\"prompt_tokens\":101,\"completion_tokens\":0,\"total_tokens\":101,\"prompt_tokens_details\":{\"cached_tokens\":7}}"));
    JsonNode gen = json(post(decode, generationBody(g6, "\"max_tokens\":13", true)).body());
    assertThat(gen.path("usage"))
        .isEqualTo(json("{\"prompt_tokens\":101,\"total_tokens\":114,\"completion_tokens\":13,\"prompt_tokens_details\":{\"cached_tokens\":7}}"));
    JsonNode withoutUsage = json(post(decode, generationBody(ctx, "\"max_tokens\":13", false)).body());
    assertThat(withoutUsage.path("usage").path("prompt_tokens_details").path("cached_tokens").asLong())
        .as("no ctx_usage forwarded: the generation-first aux-buffer path is not simulated, the bug count stays")
        .isEqualTo(ctx.path("usage").path("prompt_tokens").asLong());
  }

  @Test
  void streamedGenerationHasTheSpacedFirstEventTheUsageChunkAndDone() throws Exception {
    start(UsageVariant.BUG);
    JsonNode ctx = json(post(prefill, chat(LONG_PROMPT, "\"max_tokens\":3," + CONTEXT_PARAMS)).body());
    HttpResponse<String> response =
        post(decode, generationBody(ctx, "\"max_tokens\":3,\"stream\":true,\"stream_options\":{}", false));
    assertThat(response.headers().firstValue("content-type")).hasValue("text/event-stream; charset=utf-8");
    assertThat(response.headers().firstValue("content-length")).isEmpty();
    assertThat(response.body()).matches("(?s)data: \\{[^\\n]*\\} \\n\\n.*").endsWith("data: [DONE]\n\n");
    List<JsonNode> events = events(response.body());
    assertThat(events).hasSize(4);
    assertThat(events.get(0).path("choices").path(0).path("delta").path("role").asText()).isEqualTo("assistant");
    assertThat(events.get(0).has("usage")).as("no continuous usage unless asked").isFalse();
    JsonNode usage = events.get(3).path("usage");
    assertThat(events.get(3).path("choices")).isEmpty();
    assertThat(usage.path("completion_tokens").asLong()).isEqualTo(3);
    assertThat(usage.path("prompt_tokens_details").path("cached_tokens").asLong()).isEqualTo(usage.path("prompt_tokens").asLong());
  }

  @Test
  void continuousUsageRunsInEveryChunkAndNoStreamOptionsMeansNoUsage() throws Exception {
    start(UsageVariant.BUG);
    JsonNode ctx = json(post(prefill, chat(LONG_PROMPT, "\"max_tokens\":3," + CONTEXT_PARAMS)).body());
    List<JsonNode> continuous =
        events(post(decode, generationBody(ctx, "\"max_tokens\":3,\"stream\":true,"
            + "\"stream_options\":{\"include_usage\":true,\"continuous_usage_stats\":true}", false)).body());
    assertThat(continuous).extracting(e -> e.path("usage").path("completion_tokens").asLong()).containsExactly(1L, 2L, 3L, 3L);
    List<JsonNode> bare = events(post(decode, generationBody(ctx, "\"max_tokens\":3,\"stream\":true", false)).body());
    assertThat(bare).hasSize(3).noneMatch(e -> e.has("usage"));
  }

  /** Since #16873 the orchestrator sends MessagePack with X-TRTLLM-Msgpack: 1 and a JSON content type. */
  @Test
  void msgpackBodiesAreReadWithExactIdsAndTheFixedGenerationTakesCtxUsage() throws Exception {
    start(UsageVariant.FIXED);
    byte[] context = MsgpackBodies.fromJson(chat(LONG_PROMPT, "\"max_tokens\":4," + CONTEXT_PARAMS), MsgpackBodies.Style.WIDE);
    post(prefill, context, "x-trtllm-msgpack", "1");
    HttpResponse<String> ctxResponse = post(prefill, context, "x-trtllm-msgpack", "1");
    assertThat(ctxResponse.statusCode()).isEqualTo(200);
    JsonNode ctx = json(ctxResponse.body());
    assertThat(ctx.path("choices").path(0).path("disaggregated_params").path("ctx_request_id").asLong())
        .as("an id above 2^53 survives msgpack exactly").isEqualTo(2748779069441234567L);
    long cached = ctx.path("usage").path("prompt_tokens_details").path("cached_tokens").asLong();
    assertThat(cached).isPositive();

    byte[] generation = MsgpackBodies.fromJson(generationBody(ctx, "\"max_tokens\":4", true), MsgpackBodies.Style.COMPACT);
    JsonNode gen = json(post(decode, generation, "x-trtllm-msgpack", "1").body());
    assertThat(gen.path("usage").path("prompt_tokens_details").path("cached_tokens").asLong()).isEqualTo(cached);
    assertThat(gen.path("usage").path("completion_tokens").asLong()).isEqualTo(4);
  }

  @Test
  void aMsgpackBodyThatIsNotAJsonDocumentIsRefused() throws Exception {
    start(UsageVariant.BUG);
    HttpResponse<String> binary = post(prefill, new byte[] {(byte) 0x81, (byte) 0xa1, 'x', (byte) 0xc4, 1, 0}, "x-trtllm-msgpack", "1");
    assertThat(binary.statusCode()).isEqualTo(400);
    assertThat(json(binary.body()).path("message").asText()).contains("binary values are not JSON");
    HttpResponse<String> unmarked = post(prefill, MsgpackBodies.fromJson(chat("hello", CONTEXT_PARAMS), MsgpackBodies.Style.COMPACT));
    assertThat(unmarked.statusCode()).as("without the header the body is read as JSON").isEqualTo(400);
  }

  @Test
  void aRequestWithoutTheWorkersRequestTypeIsRefused() throws Exception {
    start(UsageVariant.BUG);
    HttpResponse<String> response = post(decode, chat("hello", CONTEXT_PARAMS));
    assertThat(response.statusCode()).isEqualTo(400);
    assertThat(json(response.body()).path("message").asText()).contains("generation_only");
    assertThat(decode.log().completions()).hasSize(1);
  }
}
