package io.disaggusage.extproc.emulator.engines;

import static io.disaggusage.extproc.emulator.engines.TrtLlmEngineTest.json;
import static io.disaggusage.extproc.emulator.engines.TrtLlmEngineTest.request;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;

/** The simulated vLLM prefill/decode pair behind its reference proxy (engines.md §2). */
class VllmEngineTest {
  private final VllmEngine engine = new VllmEngine(new PrefixCache(16, 1000));

  @Test
  void prefillCallIsCappedToOneTokenNotStreamedAndAsksForRemoteDecode() throws Exception {
    WorkerCall call = engine.contextCall(request(true), ScheduleOrder.CONTEXT_FIRST);
    JsonNode body = json(call.body());
    assertThat(body.path("max_tokens").asInt()).isEqualTo(1);
    assertThat(body.path("stream").asBoolean()).isFalse();
    assertThat(body.has("stream_options")).isFalse();
    assertThat(body.path("kv_transfer_params").path("do_remote_decode").asBoolean()).isTrue();
    assertThat(body.path("kv_transfer_params").path("remote_block_ids").isNull()).isTrue();
    assertThat(call.headers().get("x-request-id")).matches("[0-9a-f-]{36}");
    assertThat(engine.contextCall(request(true), ScheduleOrder.CONTEXT_FIRST).headers().get("x-request-id"))
        .isNotEqualTo(call.headers().get("x-request-id"));
  }

  @Test
  void decodeCallIsTheClientsRequestWithThePrefillKvParamsAndTheSameRequestId() throws Exception {
    ClientRequest request = request(true);
    WorkerCall ctxCall = engine.contextCall(request, ScheduleOrder.CONTEXT_FIRST);
    WorkerReply ctx = engine.context(ctxCall);
    WorkerCall genCall = engine.generationCall(request, ScheduleOrder.CONTEXT_FIRST, ctxCall, ctx);
    JsonNode gen = json(genCall.body());
    assertThat(genCall.headers().get("x-request-id")).isEqualTo(ctxCall.headers().get("x-request-id"));
    assertThat(gen.path("stream").asBoolean()).isTrue();
    assertThat(gen.path("max_tokens").asInt()).isEqualTo(8);
    assertThat(gen.path("kv_transfer_params")).isEqualTo(json(ctx.body()).path("kv_transfer_params"));
    assertThat(gen.path("kv_transfer_params").path("do_remote_prefill").asBoolean()).isTrue();
    assertThat(gen.path("kv_transfer_params").path("remote_block_ids").path(0)).as("one list per KV cache group")
        .hasSize((int) (ctx.truth().prompt() + 15) / 16);
    assertThat(json(ctx.body()).path("id").asText()).isEqualTo("chatcmpl-" + ctxCall.headers().get("x-request-id"));
  }

  @Test
  void prefillCountsItsCacheHitsAndDecodeCountsThePromptMinusOne() throws Exception {
    ClientRequest request = request(false);
    WorkerReply first = engine.context(engine.contextCall(request, ScheduleOrder.CONTEXT_FIRST));
    WorkerCall ctxCall = engine.contextCall(request, ScheduleOrder.CONTEXT_FIRST);
    WorkerReply second = engine.context(ctxCall);
    assertThat(first.truth().cached()).isZero();
    assertThat(second.truth().cached()).isEqualTo((second.truth().prompt() - 1) / 16 * 16);
    WorkerReply gen = engine.generation(engine.generationCall(request, ScheduleOrder.CONTEXT_FIRST, ctxCall, second));
    JsonNode usage = json(gen.body()).path("usage");
    assertThat(usage.path("prompt_tokens").asLong()).isEqualTo(second.truth().prompt());
    assertThat(usage.path("prompt_tokens_details").path("cached_tokens").asLong()).isEqualTo(second.truth().prompt() - 1);
  }

  @Test
  void streamedDecodeStartsWithARoleChunkAndEndsWithUsageAndDone() {
    ClientRequest request = request(true);
    WorkerCall ctxCall = engine.contextCall(request, ScheduleOrder.CONTEXT_FIRST);
    WorkerReply gen = engine.generation(
        engine.generationCall(request, ScheduleOrder.CONTEXT_FIRST, ctxCall, engine.context(ctxCall)));
    String sse = gen.bodyUtf8();
    assertThat(sse).startsWith("data: {").contains("\"delta\":{\"role\":\"assistant\",\"content\":\"\"}");
    assertThat(sse).doesNotContain("} \n\n").endsWith("}\n\ndata: [DONE]\n\n");
    assertThat(sse.split("\n\n")).hasSize(1 + 8 + 2);
  }

  @Test
  void proxiesOnlyRunPrefillThenDecode() {
    assertThat(engine.orders()).containsExactly(ScheduleOrder.CONTEXT_FIRST);
    ClientRequest request = request(false);
    WorkerCall ctxCall = engine.contextCall(request, ScheduleOrder.CONTEXT_FIRST);
    assertThatThrownBy(() -> engine.generationCall(request, ScheduleOrder.GENERATION_FIRST, ctxCall, null))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
