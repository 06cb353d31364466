package io.disaggusage.extproc.emulator.engines;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.disaggusage.extproc.emulator.engines.WordTokenizer.Message;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The simulated trtllm-serve disaggregated deployment puts TensorRT-LLM's shapes on the wire (engines.md §1). */
class TrtLlmEngineTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private final TrtLlmEngine engine = new TrtLlmEngine(new PrefixCache(16, 1000));

  static ClientRequest request(boolean stream) {
    return new ClientRequest(
        "m",
        List.of(new Message("user", "Explain prefix caching in disaggregated serving, in detail, for operators.".repeat(4))),
        8,
        stream);
  }

  static JsonNode json(byte[] body) throws Exception {
    return JSON.readTree(body);
  }

  @Test
  void contextCallIsMarkedContextOnlyWithAnExactInt64IdAndIsNotStreamed() throws Exception {
    WorkerCall call = engine.contextCall(request(true), ScheduleOrder.CONTEXT_FIRST);
    JsonNode body = json(call.body());
    JsonNode params = body.path("disaggregated_params");
    assertThat(params.path("request_type").asText()).isEqualTo("context_only");
    assertThat(params.path("schedule_style").asInt()).isZero();
    assertThat(params.path("disagg_request_id").asLong()).isGreaterThan(1L << 53);
    assertThat(call.bodyUtf8()).contains("\"disagg_request_id\":" + params.path("disagg_request_id").asLong());
    assertThat(body.path("stream").asBoolean()).isFalse();
    assertThat(body.has("stream_options")).isFalse();
    assertThat(call.headers()).isEqualTo(Map.of("content-type", "application/json"));
    assertThat(call.path()).isEqualTo("/v1/chat/completions");
    assertThat(engine.contextCall(request(false), ScheduleOrder.GENERATION_FIRST).bodyUtf8())
        .contains("\"schedule_style\":1")
        .doesNotContain("\"disagg_request_id\":" + params.path("disagg_request_id").asLong());
  }

  @Test
  void contextWorkerReportsItsPrefixCacheAndHandsOff() throws Exception {
    WorkerCall call = engine.contextCall(request(false), ScheduleOrder.CONTEXT_FIRST);
    WorkerReply first = engine.context(call);
    WorkerReply second = engine.context(engine.contextCall(request(false), ScheduleOrder.CONTEXT_FIRST));
    long prompt = first.truth().prompt();
    assertThat(first.status()).isEqualTo(200);
    assertThat(first.contentType()).isEqualTo("application/json");
    assertThat(first.truth().cached()).isZero();
    assertThat(second.truth().cached()).isEqualTo((prompt - 1) / 16 * 16).isPositive();
    JsonNode body = json(second.body());
    assertThat(body.path("usage").path("prompt_tokens").asLong()).isEqualTo(prompt);
    assertThat(body.path("usage").path("completion_tokens").asLong()).isEqualTo(1);
    assertThat(body.path("usage").path("prompt_tokens_details").path("cached_tokens").asLong())
        .isEqualTo(second.truth().cached());
    assertThat(body.path("prompt_token_ids")).hasSize((int) prompt);
    JsonNode handoff = body.path("choices").path(0).path("disaggregated_params");
    assertThat(body.path("choices").path(0).path("finish_reason").asText()).isEqualTo("length");
    assertThat(handoff.path("ctx_request_id").asLong()).isEqualTo(handoff.path("disagg_request_id").asLong());
    assertThat(handoff.path("first_gen_tokens")).hasSize(1);
  }

  @Test
  void contextFirstGenerationCallCarriesTheHandoffAndThePromptTokenIds() throws Exception {
    ClientRequest request = request(true);
    WorkerCall ctxCall = engine.contextCall(request, ScheduleOrder.CONTEXT_FIRST);
    WorkerReply ctx = engine.context(ctxCall);
    JsonNode gen = json(engine.generationCall(request, ScheduleOrder.CONTEXT_FIRST, ctxCall, ctx).body());
    long id = json(ctxCall.body()).path("disaggregated_params").path("disagg_request_id").asLong();
    JsonNode params = gen.path("disaggregated_params");
    assertThat(params.path("request_type").asText()).isEqualTo("generation_only");
    assertThat(params.path("ctx_request_id").asLong()).isEqualTo(id);
    assertThat(params.path("schedule_style").asInt()).isZero();
    assertThat(params.path("encoded_opaque_state").asText()).isNotEmpty();
    assertThat(gen.path("prompt_token_ids")).hasSize((int) ctx.truth().prompt());
    assertThat(gen.path("stream").asBoolean()).isTrue();
    assertThat(gen.path("stream_options").path("include_usage").asBoolean()).isTrue();
  }

  @Test
  void generationFirstCallIsBuiltFromTheContextCallAlone() throws Exception {
    ClientRequest request = request(false);
    WorkerCall ctxCall = engine.contextCall(request, ScheduleOrder.GENERATION_FIRST);
    JsonNode gen = json(engine.generationCall(request, ScheduleOrder.GENERATION_FIRST, ctxCall, null).body());
    long id = json(ctxCall.body()).path("disaggregated_params").path("disagg_request_id").asLong();
    JsonNode params = gen.path("disaggregated_params");
    assertThat(params.path("ctx_request_id").asLong()).isEqualTo(id);
    assertThat(params.path("disagg_request_id").asLong()).isEqualTo(id);
    assertThat(params.path("schedule_style").asInt()).isEqualTo(1);
    assertThat(gen.has("prompt_token_ids")).isFalse();
  }

  @Test
  void generationWorkerReportsTheWholeTransferredPromptAsCached() throws Exception {
    ClientRequest request = request(false);
    WorkerCall ctxCall = engine.contextCall(request, ScheduleOrder.CONTEXT_FIRST);
    WorkerReply ctx = engine.context(ctxCall);
    WorkerReply gen = engine.generation(engine.generationCall(request, ScheduleOrder.CONTEXT_FIRST, ctxCall, ctx));
    JsonNode usage = json(gen.body()).path("usage");
    assertThat(usage.path("prompt_tokens").asLong()).isEqualTo(ctx.truth().prompt());
    assertThat(usage.path("prompt_tokens_details").path("cached_tokens").asLong()).isEqualTo(ctx.truth().prompt());
    assertThat(usage.path("completion_tokens").asLong()).isEqualTo(8);
    assertThat(usage.path("total_tokens").asLong()).isEqualTo(ctx.truth().prompt() + 8);
    assertThat(json(gen.body()).path("choices").path(0).path("finish_reason").asText()).isEqualTo("length");
  }

  @Test
  void streamedGenerationHasTheTrtLlmFramingAUsageChunkAndDone() {
    ClientRequest request = request(true);
    WorkerCall ctxCall = engine.contextCall(request, ScheduleOrder.GENERATION_FIRST);
    WorkerReply gen = engine.generation(engine.generationCall(request, ScheduleOrder.GENERATION_FIRST, ctxCall, null));
    String sse = gen.bodyUtf8();
    assertThat(gen.contentType()).startsWith("text/event-stream");
    assertThat(sse).startsWith("data: {").contains("} \n\ndata: {").endsWith("data: [DONE]\n\n");
    assertThat(sse.split("\n\n")).hasSize(8 + 2);
    assertThat(sse).contains("\"choices\":[],\"usage\":{\"prompt_tokens\":");
  }

  @Test
  void aRequestWithoutTheRightMarkerIsRefusedLikeAnEngineDoes() throws Exception {
    WorkerReply reply = engine.generation(new WorkerCall("/v1/chat/completions", Map.of(), "{\"messages\":[]}".getBytes()));
    assertThat(reply.status()).isEqualTo(400);
    assertThat(json(reply.body()).path("object").asText()).isEqualTo("error");
    assertThat(engine.context(new WorkerCall("/v1/chat/completions", Map.of(), "not json".getBytes())).status())
        .isEqualTo(400);
  }
}
