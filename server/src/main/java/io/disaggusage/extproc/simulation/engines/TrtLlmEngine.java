package io.disaggusage.extproc.simulation.engines;

import static io.disaggusage.extproc.simulation.engines.OpenAiWire.JSON;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.simulation.engines.OpenAiWire.BadRequest;
import io.disaggusage.extproc.simulation.engines.WorkerReply.TokenCounts;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * {@code trtllm-serve disaggregated}: the orchestrator marks each call with
 * {@code disaggregated_params.request_type} ({@code context_only} / {@code generation_only}) and an int64
 * {@code disagg_request_id}, and schedules context-first ({@code schedule_style} 0: the generation request
 * carries the context reply's handoff and {@code prompt_token_ids}) or generation-first (1: both calls up
 * front). Request bodies are JSON (the JSON transport; newer releases send msgpack). The generation
 * worker reports the whole transferred prompt as cached (engines.md §1.5).
 */
public final class TrtLlmEngine implements DisaggEngine {
  /** A snowflake-style id far above 2^53, as the orchestrator's global ids are: exact int64 or nothing. */
  private static final long FIRST_REQUEST_ID = 2_748_779_069_441_234_567L;

  private final WordTokenizer tokenizer = new WordTokenizer();
  private final PrefixCache contextCache;
  private final AtomicLong nextRequestId = new AtomicLong(FIRST_REQUEST_ID);

  public TrtLlmEngine(PrefixCache contextCache) {
    this.contextCache = contextCache;
  }

  @Override
  public String name() {
    return "TensorRT-LLM";
  }

  @Override
  public List<ScheduleOrder> orders() {
    return List.of(ScheduleOrder.CONTEXT_FIRST, ScheduleOrder.GENERATION_FIRST);
  }

  @Override
  public WorkerCall contextCall(ClientRequest request, ScheduleOrder order) {
    ObjectNode body = OpenAiWire.clientBody(request);
    body.put("stream", false);
    body.remove("stream_options");
    ObjectNode params = body.putObject("disaggregated_params");
    params.put("request_type", "context_only");
    params.put("disagg_request_id", nextRequestId.getAndIncrement());
    params.put("schedule_style", scheduleStyle(order));
    return call(body);
  }

  @Override
  public WorkerReply context(WorkerCall call) {
    try {
      ObjectNode request = OpenAiWire.parseRequest(call);
      JsonNode params = request.path("disaggregated_params");
      if (!"context_only".equals(params.path("request_type").asText())) {
        throw new BadRequest("disaggregated_params.request_type: expected context_only");
      }
      long requestId = params.path("disagg_request_id").asLong();
      int[] prompt = tokenizer.encodeChat(OpenAiWire.messages(request));
      int cached = contextCache.prefill(prompt);
      String first = OpenAiWire.answerPieces(tokenizer, 1).get(0);
      ObjectNode body =
          OpenAiWire.chatCompletion(
              "chatcmpl-ctx-" + requestId, request.path("model").asText(), first, "length",
              OpenAiWire.usage(prompt.length, 1, cached));
      ObjectNode handoff = ((ObjectNode) body.path("choices").get(0)).putObject("disaggregated_params");
      handoff.put("request_type", "context_only");
      handoff.putArray("first_gen_tokens").add(tokenizer.encode(first)[0]);
      handoff.put("ctx_request_id", requestId);
      handoff.put("encoded_opaque_state", Base64.getEncoder().encodeToString(OpenAiWire.utf8("kv@ctx-0:" + requestId)));
      handoff.putNull("draft_tokens");
      handoff.put("disagg_request_id", requestId);
      ArrayNode ids = body.putArray("prompt_token_ids");
      for (int id : prompt) {
        ids.add(id);
      }
      return new WorkerReply(200, OpenAiWire.JSON_TYPE, OpenAiWire.bytes(body), new TokenCounts(prompt.length, cached, 1));
    } catch (BadRequest e) {
      return e.reply();
    }
  }

  @Override
  public WorkerCall generationCall(
      ClientRequest request, ScheduleOrder order, WorkerCall contextCall, WorkerReply contextReply) {
    ObjectNode body = OpenAiWire.clientBody(request);
    ObjectNode params;
    if (order == ScheduleOrder.CONTEXT_FIRST) {
      // The context reply's handoff with the request type flipped, and its prompt token ids.
      JsonNode reply = read(contextReply.body());
      body.set("prompt_token_ids", reply.path("prompt_token_ids"));
      params = ((ObjectNode) reply.path("choices").path(0).path("disaggregated_params")).deepCopy();
    } else {
      params = JSON.createObjectNode();
      long requestId = read(contextCall.body()).path("disaggregated_params").path("disagg_request_id").asLong();
      params.put("ctx_request_id", requestId).put("disagg_request_id", requestId);
    }
    params.put("request_type", "generation_only");
    params.put("schedule_style", scheduleStyle(order));
    body.set("disaggregated_params", params);
    return call(body);
  }

  @Override
  public WorkerReply generation(WorkerCall call) {
    try {
      ObjectNode request = OpenAiWire.parseRequest(call);
      JsonNode params = request.path("disaggregated_params");
      if (!"generation_only".equals(params.path("request_type").asText())) {
        throw new BadRequest("disaggregated_params.request_type: expected generation_only");
      }
      JsonNode promptIds = request.path("prompt_token_ids");
      int prompt = promptIds.isArray() ? promptIds.size() : tokenizer.encodeChat(OpenAiWire.messages(request)).length;
      List<String> pieces = OpenAiWire.answerPieces(tokenizer, request.path("max_tokens").asInt(16));
      // The bug: the KV received from the context worker is counted as a prefix-cache hit.
      return OpenAiWire.answer(
          OpenAiWire.Style.TRTLLM, "chatcmpl-gen-" + params.path("disagg_request_id").asText(),
          request.path("model").asText(), pieces, OpenAiWire.finishReason(tokenizer, pieces.size()),
          OpenAiWire.usage(prompt, pieces.size(), prompt), request.path("stream").asBoolean(),
          new TokenCounts(prompt, 0, pieces.size()));
    } catch (BadRequest e) {
      return e.reply();
    }
  }

  private static int scheduleStyle(ScheduleOrder order) {
    return order == ScheduleOrder.CONTEXT_FIRST ? 0 : 1;
  }

  private static WorkerCall call(ObjectNode body) {
    Map<String, String> headers = new LinkedHashMap<>();
    headers.put("content-type", OpenAiWire.JSON_TYPE);
    return new WorkerCall("/v1/chat/completions", headers, OpenAiWire.bytes(body));
  }

  private static JsonNode read(byte[] json) {
    try {
      return JSON.readTree(json);
    } catch (java.io.IOException e) {
      throw new IllegalStateException("the simulated worker wrote JSON it cannot read", e);
    }
  }
}
