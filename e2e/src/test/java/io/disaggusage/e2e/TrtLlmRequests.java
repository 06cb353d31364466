package io.disaggusage.e2e;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.e2e.TrtLlmRelease.ScheduleStyle;
import java.util.Optional;
import java.util.Set;

/**
 * The two worker request bodies {@code OpenAIDisaggregatedService} builds from a client's chat request
 * ({@code _get_ctx_request}, {@code _get_gen_request}). Pydantic dumps only fields that were set, and
 * the service sets some explicitly, so those are on the wire even when null: {@code stream_options} of the
 * context request and {@code conversation_id} of both {@code disaggregated_params} (the client's, null without
 * one). A client's own {@code disaggregated_params} never reaches a worker: both are written anew.
 */
final class TrtLlmRequests {
  /**
   * The members {@code ChatCompletionRequest} declares ({@code tensorrt_llm/serve/openai_protocol.py}); like every
   * {@code OpenAIBaseModel} it is {@code extra="forbid"}, so any other member fails validation.
   */
  static final Set<String> CHAT_FIELDS = Set.of("messages", "prompt_token_ids", "model", "frequency_penalty",
      "logit_bias", "logprobs", "top_logprobs", "max_completion_tokens", "max_tokens", "n", "presence_penalty",
      "response_format", "seed", "stop", "stream", "stream_options", "temperature", "top_p", "tools", "tool_choice",
      "user", "reasoning_effort", "best_of", "use_beam_search", "top_k", "top_p_min", "min_p", "repetition_penalty",
      "length_penalty", "early_stopping", "stop_token_ids", "include_stop_str_in_output", "ignore_eos", "min_tokens",
      "skip_special_tokens", "spaces_between_special_tokens", "truncate_prompt_tokens", "lora_request", "echo",
      "add_generation_prompt", "add_special_tokens", "documents", "chat_template", "chat_template_kwargs",
      "disaggregated_params", "cache_salt");
  /** {@code DisaggregatedParams}' members, {@code request_type} required (a {@code str} without default). */
  static final Set<String> DISAGGREGATED_FIELDS = Set.of("request_type", "first_gen_tokens", "first_gen_log_probs",
      "ctx_request_id", "encoded_opaque_state", "draft_tokens", "disagg_request_id", "ctx_dp_rank", "ctx_info_endpoint",
      "schedule_style", "ctx_usage", "conversation_id");
  /** {@code UsageInfo}'s members ({@code ctx_usage}); {@code PromptTokensDetails} has {@code cached_tokens} only. */
  static final Set<String> USAGE_FIELDS = Set.of("prompt_tokens", "total_tokens", "completion_tokens", "prompt_tokens_details");

  private TrtLlmRequests() {}

  /**
   * Why the orchestrator's FastAPI route refuses {@code client} before any worker is called, if it does: the body
   * is validated as a {@code ChatCompletionRequest}, whose models forbid unknown members — a client's
   * {@code kv_transfer_params}, {@code vllm_xargs} or {@code bootstrap_room} — and whose
   * {@code disaggregated_params} needs a {@code request_type}; a {@code stream_options} without {@code stream}
   * fails its {@code validate_stream_options}. The server answers such a body 400 (openai_disagg_server.py's
   * {@code RequestValidationError} handler). Only the checks a client's forgery meets are modelled.
   */
  static Optional<String> validationError(JsonNode client) {
    Optional<String> unknown = unknownMember(client, CHAT_FIELDS, "");
    if (unknown.isPresent()) {
      return unknown;
    }
    if (client.hasNonNull("stream_options") && !client.path("stream").asBoolean(false)) {
      return Optional.of("Value error, stream_options can only be set if stream is true");
    }
    JsonNode params = client.path("disaggregated_params");
    if (params.isMissingNode() || params.isNull()) {
      return Optional.empty();
    }
    if (!params.isObject()) {
      return Optional.of("disaggregated_params: Input should be a valid dictionary or instance of DisaggregatedParams");
    }
    if (!params.path("request_type").isTextual()) {
      return Optional.of("disaggregated_params.request_type: Field required");
    }
    Optional<String> unknownParam = unknownMember(params, DISAGGREGATED_FIELDS, "disaggregated_params.");
    if (unknownParam.isPresent() || !params.path("ctx_usage").isObject()) {
      return unknownParam;
    }
    Optional<String> unknownUsage = unknownMember(params.path("ctx_usage"), USAGE_FIELDS, "disaggregated_params.ctx_usage.");
    JsonNode details = params.path("ctx_usage").path("prompt_tokens_details");
    return unknownUsage.isPresent() || !details.isObject()
        ? unknownUsage : unknownMember(details, Set.of("cached_tokens"), "disaggregated_params.ctx_usage.prompt_tokens_details.");
  }

  private static Optional<String> unknownMember(JsonNode object, Set<String> known, String path) {
    for (var names = object.fieldNames(); names.hasNext(); ) {
      String name = names.next();
      if (!known.contains(name)) {
        return Optional.of(path + name + ": Extra inputs are not permitted");
      }
    }
    return Optional.empty();
  }

  /**
   * The client's {@code disaggregated_params.conversation_id} ({@code _get_conversation_id}), which the
   * orchestrator carries into the {@code disaggregated_params} it writes for both workers; null without one.
   */
  private static JsonNode conversationId(JsonNode client) {
    JsonNode id = client.path("disaggregated_params").path("conversation_id");
    return id.isMissingNode() ? com.fasterxml.jackson.databind.node.NullNode.getInstance() : id.deepCopy();
  }

  /**
   * The client's request with {@code disaggregated_params} replaced by a {@code context_only} one and
   * {@code stream: false}, {@code stream_options: null}; {@code max_tokens} is left as the client sent it
   * (the context worker stops after the first token because of {@code context_only}).
   */
  static ObjectNode context(ObjectNode client, long disaggRequestId, ScheduleStyle style) {
    ObjectNode body = client.deepCopy();
    ObjectNode params = body.putObject("disaggregated_params");
    params.put("request_type", "context_only").put("disagg_request_id", disaggRequestId).put("schedule_style", style.wire);
    params.set("conversation_id", conversationId(client));
    body.put("stream", false);
    body.putNull("stream_options");
    return body;
  }

  /**
   * Context-first: the context response's {@code choices[0].disaggregated_params} (first_gen_tokens,
   * ctx_request_id, encoded_opaque_state, … as the worker returned them) with {@code request_type}
   * flipped to {@code generation_only}, the schedule style, {@code ctx_usage} when the release carries
   * it, and the original {@code disagg_request_id}; the chat prompt travels again, plus the context
   * response's {@code prompt_token_ids}. The client's {@code stream} and {@code stream_options} stay.
   */
  static ObjectNode generationAfter(ObjectNode client, JsonNode contextResponse, long disaggRequestId, TrtLlmRelease release) {
    ObjectNode body = client.deepCopy();
    ObjectNode params = ((ObjectNode) contextResponse.path("choices").path(0).path("disaggregated_params")).deepCopy();
    params.put("request_type", "generation_only").put("schedule_style", release.style().wire);
    params.set("conversation_id", conversationId(client));
    if (release.forwardsCtxUsage()) {
      params.set("ctx_usage", contextResponse.path("usage").deepCopy());
    }
    params.put("disagg_request_id", disaggRequestId);
    body.set("disaggregated_params", params);
    body.set("prompt_token_ids", contextResponse.path("prompt_token_ids").deepCopy());
    return body;
  }

  /**
   * Generation-first: built before any context response exists, so there is no handoff and no
   * {@code ctx_usage} to carry; both ids are the context request's {@code disagg_request_id}.
   */
  static ObjectNode generationFirst(ObjectNode client, long disaggRequestId) {
    ObjectNode body = client.deepCopy();
    ObjectNode params = body.putObject("disaggregated_params");
    params.put("request_type", "generation_only").put("ctx_request_id", disaggRequestId).put("disagg_request_id", disaggRequestId);
    params.put("schedule_style", ScheduleStyle.GENERATION_FIRST.wire);
    params.set("conversation_id", conversationId(client));
    return body;
  }

  /**
   * {@code _verify_ctx_response}: one choice whose {@code disaggregated_params} has both ids; the reason
   * the orchestrator refuses the response otherwise.
   */
  static Optional<String> contextResponseProblem(JsonNode contextResponse) {
    JsonNode choices = contextResponse.path("choices");
    if (choices.size() != 1) {
      return Optional.of("Context server returned " + choices.size() + " choices, expecting 1.");
    }
    JsonNode params = choices.path(0).path("disaggregated_params");
    if (!params.isObject()) {
      return Optional.of("Context server did not return disaggregated params.");
    }
    for (String id : new String[] {"ctx_request_id", "disagg_request_id"}) {
      if (!params.path(id).isIntegralNumber()) {
        return Optional.of("Invalid disaggregated params: " + id + " is None.");
      }
    }
    return Optional.empty();
  }
}
