package io.disaggusage.extproc.emulator.engines;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.emulator.engines.WorkerReply.TokenCounts;
import java.util.ArrayList;
import java.util.List;

/**
 * vLLM 0.32's chat completion wire, member for member as its OpenAI server writes it (pydantic models that
 * keep their null members), held to a real vLLM 0.32 prefill/decode pair by the suite's differential test
 * ({@code VllmSimulationDiffTest}): a JSON answer ends with {@code prompt_logprobs}, {@code
 * prompt_token_ids}, {@code prompt_text}, {@code kv_transfer_params} (null unless a prefill hands off),
 * {@code ec_transfer_params} and {@code metrics}; its usage details carry {@code created_cache_tokens} and
 * {@code multimodal_tokens: null}. A stream's first chunk carries the role and the prompt members, content
 * chunks a {@code token_ids} member (and {@code stop_reason} on the last), a continuous running usage has
 * no prompt details, and the final usage chunk has {@code cached_tokens} and {@code created_cache_tokens}
 * only, followed by {@code system_fingerprint}.
 */
final class VllmWire {
  /** What vLLM 0.32 writes as {@code system_fingerprint}: its version and a hash of its configuration. */
  static final String SYSTEM_FINGERPRINT = "vllm-0.32.0-5e1a7c0d";

  private VllmWire() {}

  /**
   * A worker's whole answer (see {@link OpenAiWire#answer}); {@code createdCache} is the prompt tokens the
   * worker newly wrote to its prefix cache ({@code created_cache_tokens}).
   */
  static WorkerReply answer(
      String id, String model, List<String> pieces, String finishReason, long prompt, long cached, long createdCache,
      AnswerShape shape, TokenCounts truth) {
    int choices = shape.choices();
    long completion = (long) pieces.size() * choices;
    if (!shape.stream()) {
      ObjectNode body = completion(id, model, choices, String.join("", pieces), finishReason, prompt, completion, cached, createdCache);
      return new WorkerReply(200, OpenAiWire.JSON_TYPE, OpenAiWire.bytes(body), truth);
    }
    List<ObjectNode> events = new ArrayList<>();
    for (int index = 0; index < choices; index++) {
      ObjectNode chunk = chunk(id, model, index);
      ObjectNode choice = (ObjectNode) chunk.get("choices").get(0);
      choice.putObject("delta").put("role", "assistant").put("content", "");
      choice.putNull("logprobs");
      choice.putNull("finish_reason");
      runningUsage(chunk, shape, prompt, 0);
      chunk.putNull("prompt_token_ids");
      chunk.putNull("prompt_text");
      events.add(chunk);
    }
    long produced = 0;
    for (int i = 0; i < pieces.size(); i++) {
      boolean last = i == pieces.size() - 1;
      for (int index = 0; index < choices; index++) {
        produced++;
        ObjectNode chunk = chunk(id, model, index);
        ObjectNode choice = (ObjectNode) chunk.get("choices").get(0);
        choice.putObject("delta").put("content", pieces.get(i));
        choice.putNull("logprobs");
        choice.put("finish_reason", last ? finishReason : null);
        if (last) {
          choice.putNull("stop_reason");
        }
        choice.putNull("token_ids");
        runningUsage(chunk, shape, prompt, produced);
        events.add(chunk);
      }
    }
    if (shape.includeUsage()) {
      ObjectNode chunk = chunk(id, model, -1);
      ObjectNode usage = chunk.putObject("usage");
      usage.put("prompt_tokens", prompt).put("total_tokens", prompt + completion).put("completion_tokens", completion);
      usage.putObject("prompt_tokens_details").put("cached_tokens", cached).put("created_cache_tokens", createdCache);
      chunk.put("system_fingerprint", SYSTEM_FINGERPRINT);
      events.add(chunk);
    }
    return new WorkerReply(200, OpenAiWire.SSE_TYPE, OpenAiWire.sse(events, false), truth);
  }

  /** A {@code chat.completion} of {@code choices} equal choices; {@code kv_transfer_params} null. */
  static ObjectNode completion(
      String id, String model, int choices, String content, String finishReason, long prompt, long completion, long cached,
      long createdCache) {
    ObjectNode body = OpenAiWire.JSON.createObjectNode();
    body.put("id", id).put("object", "chat.completion").put("created", OpenAiWire.CREATED).put("model", model);
    var array = body.putArray("choices");
    for (int index = 0; index < choices; index++) {
      ObjectNode choice = array.addObject();
      choice.put("index", index);
      choice.putObject("message").put("role", "assistant").put("content", content).putNull("refusal").putNull("annotations")
          .putNull("audio").putNull("function_call").putNull("reasoning");
      choice.putNull("logprobs");
      choice.put("finish_reason", finishReason);
      choice.putNull("stop_reason").putNull("token_ids").putNull("routed_experts");
    }
    body.putNull("service_tier");
    body.put("system_fingerprint", SYSTEM_FINGERPRINT);
    ObjectNode usage = body.putObject("usage");
    usage.put("prompt_tokens", prompt).put("total_tokens", prompt + completion).put("completion_tokens", completion);
    usage.putObject("prompt_tokens_details").put("cached_tokens", cached).put("created_cache_tokens", createdCache)
        .putNull("multimodal_tokens");
    usage.putNull("completion_tokens_details");
    body.putNull("prompt_logprobs").putNull("prompt_token_ids").putNull("prompt_text").putNull("kv_transfer_params")
        .putNull("ec_transfer_params").putNull("metrics");
    return body;
  }

  /** A chunk's head, with one choice of {@code index} (none for the usage chunk: {@code index} < 0). */
  private static ObjectNode chunk(String id, String model, int index) {
    ObjectNode chunk = OpenAiWire.JSON.createObjectNode();
    chunk.put("id", id).put("object", "chat.completion.chunk").put("created", OpenAiWire.CREATED).put("model", model);
    var choices = chunk.putArray("choices");
    if (index >= 0) {
      choices.addObject().put("index", index);
    }
    return chunk;
  }

  /** Continuous usage: the running counts, without prompt details (vLLM writes them on the final chunk only). */
  private static void runningUsage(ObjectNode chunk, AnswerShape shape, long prompt, long produced) {
    if (shape.continuousUsage()) {
      chunk.putObject("usage").put("prompt_tokens", prompt).put("total_tokens", prompt + produced)
          .put("completion_tokens", produced).putNull("completion_tokens_details");
    }
  }
}
