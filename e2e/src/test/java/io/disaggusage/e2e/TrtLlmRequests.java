package io.disaggusage.e2e;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.e2e.TrtLlmRelease.ScheduleStyle;
import java.util.Optional;

/**
 * The two worker request bodies {@code OpenAIDisaggregatedService} builds from a client's chat request
 * ({@code _get_ctx_request}, {@code _get_gen_request}). Pydantic dumps only fields that were set, and
 * the service sets some to null explicitly, so those nulls are on the wire: {@code stream_options} of the
 * context request and {@code conversation_id} of both {@code disaggregated_params}.
 */
final class TrtLlmRequests {
  private TrtLlmRequests() {}

  /**
   * The client's request with {@code disaggregated_params} replaced by a {@code context_only} one and
   * {@code stream: false}, {@code stream_options: null}; {@code max_tokens} is left as the client sent it
   * (the context worker stops after the first token because of {@code context_only}).
   */
  static ObjectNode context(ObjectNode client, long disaggRequestId, ScheduleStyle style) {
    ObjectNode body = client.deepCopy();
    ObjectNode params = body.putObject("disaggregated_params");
    params.put("request_type", "context_only").put("disagg_request_id", disaggRequestId).put("schedule_style", style.wire);
    params.putNull("conversation_id");
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
    params.putNull("conversation_id");
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
    params.putNull("conversation_id");
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
