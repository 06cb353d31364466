package io.disaggusage.extproc.emulator.engines;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.MissingNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * {@code trtllm-serve disaggregated}: the orchestrator marks each call with
 * {@code disaggregated_params.request_type} ({@code context_only} / {@code generation_only}) and an int64
 * {@code disagg_request_id}, and schedules context-first ({@code schedule_style} 0: the generation request
 * carries the context reply's handoff and {@code prompt_token_ids}) or generation-first (1: both calls up
 * front). Request bodies are JSON (the JSON transport; newer releases send msgpack). With
 * {@link UsageVariant#BUG} the generation worker reports the whole transferred prompt as cached
 * (engines.md §1.5); with {@link UsageVariant#FIXED} it takes {@code prompt_tokens} and
 * {@code cached_tokens} from the {@code disaggregated_params.ctx_usage} the orchestrator forwards
 * (#14177), and without one reports as the bug does (the generation-first aux-buffer path of #15246 is
 * not simulated).
 */
public final class TrtLlmEngine extends SimulatedEngine {
  /** A snowflake-style id far above 2^53, as the orchestrator's global ids are: exact int64 or nothing. */
  private static final long FIRST_REQUEST_ID = 2_748_779_069_441_234_567L;

  private final AtomicLong nextRequestId = new AtomicLong(FIRST_REQUEST_ID);

  public TrtLlmEngine(PrefixCache contextCache) {
    this(contextCache, UsageVariant.BUG);
  }

  public TrtLlmEngine(PrefixCache contextCache, UsageVariant variant) {
    super(contextCache, variant);
    if (variant == UsageVariant.WHOLE_PROMPT_BUG) {
      throw new IllegalArgumentException("TensorRT-LLM's bug already counts the whole prompt: use bug");
    }
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
    return jsonCall(body, Map.of());
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
      if (variant == UsageVariant.FIXED) {
        // releases with #14177 forward the context usage for the generation worker to report
        params.set("ctx_usage", reply.path("usage"));
      }
    } else {
      params = OpenAiWire.JSON.createObjectNode();
      long requestId = read(contextCall.body()).path("disaggregated_params").path("disagg_request_id").asLong();
      params.put("ctx_request_id", requestId).put("disagg_request_id", requestId);
    }
    params.put("request_type", "generation_only");
    params.put("schedule_style", scheduleStyle(order));
    body.set("disaggregated_params", params);
    return jsonCall(body, Map.of());
  }

  @Override
  void requireContextCall(JsonNode request) throws BadRequest {
    requireRequestType(request, "context_only");
  }

  @Override
  void requireGenerationCall(JsonNode request) throws BadRequest {
    requireRequestType(request, "generation_only");
  }

  private static void requireRequestType(JsonNode request, String type) throws BadRequest {
    if (!type.equals(request.path("disaggregated_params").path("request_type").asText())) {
      throw new BadRequest("disaggregated_params.request_type: expected " + type);
    }
  }

  @Override
  String responseId(WorkerCall call, JsonNode request, boolean context) {
    return (context ? "chatcmpl-ctx-" : "chatcmpl-gen-") + request.path("disaggregated_params").path("disagg_request_id").asText();
  }

  @Override
  void addHandoff(ObjectNode reply, WorkerCall call, JsonNode request, int[] prompt, int cached) {
    long requestId = request.path("disaggregated_params").path("disagg_request_id").asLong();
    ObjectNode handoff = ((ObjectNode) reply.path("choices").get(0)).putObject("disaggregated_params");
    handoff.put("request_type", "context_only");
    handoff.putArray("first_gen_tokens").add(tokenizer.encode(OpenAiWire.answerPieces(tokenizer, 1).get(0))[0]);
    handoff.put("ctx_request_id", requestId);
    handoff.put("encoded_opaque_state", Base64.getEncoder().encodeToString(OpenAiWire.utf8("kv@ctx-0:" + requestId)));
    handoff.putNull("draft_tokens");
    handoff.put("disagg_request_id", requestId);
    ArrayNode ids = reply.putArray("prompt_token_ids");
    for (int id : prompt) {
      ids.add(id);
    }
  }

  /** Context-first generation calls carry the prompt as the context worker's token ids. */
  @Override
  int generationPrompt(JsonNode request) throws BadRequest {
    JsonNode ids = request.path("prompt_token_ids");
    return ids.isArray() ? ids.size() : super.generationPrompt(request);
  }

  /**
   * Bug: the KV received from the context worker is counted as a prefix-cache hit, all of it. Fixed:
   * the context worker's count from {@code ctx_usage} (absent counts as 0, as the fix reads it).
   */
  @Override
  long reportedCached(JsonNode request, int prompt) {
    JsonNode ctxUsage = ctxUsage(request);
    return ctxUsage.isObject() ? ctxUsage.path("prompt_tokens_details").path("cached_tokens").asLong(0) : prompt;
  }

  /** Fixed: the context worker's {@code prompt_tokens}, as {@code rewrite_usage_info_from_ctx} takes it. */
  @Override
  long reportedPrompt(JsonNode request, int prompt) {
    JsonNode ctxUsage = ctxUsage(request);
    return ctxUsage.isObject() ? ctxUsage.path("prompt_tokens").asLong(prompt) : prompt;
  }

  /** The forwarded context usage the fixed release reads; missing for the bug variant. */
  private JsonNode ctxUsage(JsonNode request) {
    return variant == UsageVariant.FIXED
        ? request.path("disaggregated_params").path("ctx_usage")
        : MissingNode.getInstance();
  }

  @Override
  OpenAiWire.Style style() {
    return OpenAiWire.Style.TRTLLM;
  }

  private static int scheduleStyle(ScheduleOrder order) {
    return order == ScheduleOrder.CONTEXT_FIRST ? 0 : 1;
  }
}
