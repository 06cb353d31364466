package io.disaggusage.extproc.emulator.engines;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The legacy completions answer ({@code /v1/completions}, {@code object: "text_completion"}) a worker gives
 * where it would give a chat completion: the same counts, ids and hand-off members, in the completions shape —
 * each choice's {@code text} in place of its {@code message} or {@code delta}, no role chunk in a stream, an id
 * {@code cmpl-…}. vLLM's members are those of vLLM 0.32's {@code CompletionResponse} and
 * {@code CompletionStreamResponse} as its {@code completion/serving.py} writes them (read in its code, not yet held
 * to the real engine by a differential test): the JSON choices carry {@code stop_reason}, {@code token_ids},
 * {@code prompt_logprobs}, {@code prompt_token_ids} and {@code routed_experts} (null), the usage
 * {@code prompt_tokens_details: {cached_tokens, created_cache_tokens: null, multimodal_tokens: null}}; stream chunks
 * carry {@code stop_reason}, {@code prompt_token_ids} and {@code token_ids} (null) in every choice, the final usage
 * chunk {@code prompt_tokens_details: {cached_tokens}} only, and without a usage chunk the last chunk carries
 * {@code system_fingerprint}. SGLang's and TensorRT-LLM's keep OpenAI's members only.
 */
public final class CompletionsWire {
  /** The legacy completions path. */
  public static final String PATH = "/v1/completions";

  private static final Set<String> CHAT_CHOICE = Set.of("index", "message", "delta", "logprobs", "finish_reason");

  private CompletionsWire() {}

  /** The completions answer standing for {@code chat}, the worker's chat answer to the same request; errors as they are. */
  public static WorkerReply fromChat(WorkerReply chat, OpenAiWire.Style style) {
    if (chat.status() != 200) {
      return chat;
    }
    if (!chat.contentType().startsWith("text/event-stream")) {
      return new WorkerReply(200, chat.contentType(), OpenAiWire.bytes(json(read(chat.body()), style)), chat.truth());
    }
    return new WorkerReply(200, chat.contentType(), stream(chat.bodyUtf8(), style), chat.truth());
  }

  private static ObjectNode json(JsonNode chat, OpenAiWire.Style style) {
    ObjectNode out = head(chat);
    var choices = out.putArray("choices");
    for (JsonNode c : chat.path("choices")) {
      ObjectNode choice = choices.addObject();
      choice.set("index", c.get("index"));
      choice.put("text", c.path("message").path("content").asText(""));
      choice.putNull("logprobs");
      choice.set("finish_reason", c.get("finish_reason"));
      if (style == OpenAiWire.Style.VLLM) {
        choice.putNull("stop_reason").putNull("token_ids").putNull("prompt_logprobs").putNull("prompt_token_ids")
            .putNull("routed_experts");
      } else {
        copyRest(c, choice, CHAT_CHOICE);
      }
    }
    if (style != OpenAiWire.Style.VLLM) {
      copyRest(chat, out, Set.of("id", "object", "created", "model", "choices"));
      return out;
    }
    out.putNull("service_tier");
    out.set("system_fingerprint", chat.get("system_fingerprint"));
    ObjectNode usage = chat.path("usage").deepCopy();
    if (usage.path("prompt_tokens_details") instanceof ObjectNode details) {
      details.putNull("created_cache_tokens"); // completions' serving sets cached_tokens only
    }
    out.set("usage", usage);
    out.set("kv_transfer_params", chat.get("kv_transfer_params"));
    out.putNull("ec_transfer_params").putNull("metrics");
    return out;
  }

  private static byte[] stream(String chat, OpenAiWire.Style style) {
    List<ObjectNode> events = new ArrayList<>();
    boolean usageChunk = false;
    for (String event : chat.split("\n\n")) {
      String data = event.trim();
      if (!data.startsWith("data: ") || data.equals("data: [DONE]")) {
        continue;
      }
      JsonNode chunk = read(data.substring("data: ".length()).getBytes(StandardCharsets.UTF_8));
      if (chunk.path("choices").isEmpty()) {
        usageChunk |= chunk.has("usage");
        events.add(usageChunk(chunk, style));
        continue;
      }
      JsonNode choice = chunk.path("choices").get(0);
      JsonNode delta = choice.path("delta");
      if (delta.has("role") && delta.path("content").asText("").isEmpty()) {
        continue; // a role chunk: completions have none
      }
      ObjectNode out = head(chunk);
      ObjectNode text = out.putArray("choices").addObject();
      text.set("index", choice.get("index"));
      text.put("text", delta.path("content").asText(""));
      text.putNull("logprobs");
      text.set("finish_reason", choice.get("finish_reason"));
      if (style == OpenAiWire.Style.VLLM) {
        text.putNull("stop_reason").putNull("prompt_token_ids").putNull("token_ids");
      }
      if (chunk.has("usage")) {
        ObjectNode usage = chunk.get("usage").deepCopy();
        if (style == OpenAiWire.Style.VLLM) {
          usage.remove("completion_tokens_details"); // never set on a running completions usage
        }
        out.set("usage", usage);
      }
      events.add(out);
    }
    if (style == OpenAiWire.Style.VLLM && !usageChunk) { // vLLM stamps the terminal chunk when no usage chunk follows
      events.stream().filter(e -> e.path("choices").path(0).path("finish_reason").isTextual())
          .forEach(e -> e.put("system_fingerprint", VllmWire.SYSTEM_FINGERPRINT));
    }
    return OpenAiWire.sse(events, false);
  }

  private static ObjectNode usageChunk(JsonNode chunk, OpenAiWire.Style style) {
    ObjectNode out = head(chunk);
    out.putArray("choices");
    if (chunk.has("usage")) {
      ObjectNode usage = chunk.get("usage").deepCopy();
      if (style == OpenAiWire.Style.VLLM) { // written without its null members
        usage.remove("completion_tokens_details");
        if (usage.path("prompt_tokens_details") instanceof ObjectNode details) {
          details.retain("cached_tokens");
        }
      }
      out.set("usage", usage);
    }
    copyRest(chunk, out, Set.of("id", "object", "created", "model", "choices", "usage"));
    return out;
  }

  /** {@code id} ({@code cmpl-…}), {@code object}, {@code created}, {@code model}. */
  private static ObjectNode head(JsonNode chat) {
    ObjectNode out = OpenAiWire.JSON.createObjectNode();
    String id = chat.path("id").asText("");
    out.put("id", id.startsWith("chatcmpl-") ? "cmpl-" + id.substring("chatcmpl-".length()) : id);
    out.put("object", "text_completion");
    out.set("created", chat.get("created"));
    out.set("model", chat.get("model"));
    return out;
  }

  private static void copyRest(JsonNode from, ObjectNode to, Set<String> except) {
    for (Iterator<Map.Entry<String, JsonNode>> it = from.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> member = it.next();
      if (!except.contains(member.getKey()) && !to.has(member.getKey())) {
        to.set(member.getKey(), member.getValue());
      }
    }
  }

  private static JsonNode read(byte[] json) {
    try {
      return OpenAiWire.JSON.readTree(json);
    } catch (IOException e) {
      throw new IllegalStateException("a simulated worker wrote JSON it cannot read", e);
    }
  }
}
