package io.disaggusage.extproc.emulator.engines;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.emulator.engines.WordTokenizer.Message;
import io.disaggusage.extproc.emulator.engines.WorkerReply.TokenCounts;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The OpenAI chat completion shapes the simulated workers share: request parsing, usage objects,
 * JSON responses and server-sent event streams, written compactly as the engines' pydantic models do.
 */
public final class OpenAiWire {
  public static final ObjectMapper JSON = new ObjectMapper();
  public static final String JSON_TYPE = "application/json";
  public static final String SSE_TYPE = "text/event-stream; charset=utf-8";
  /** A fixed {@code created} time, so the simulation's bytes are the same on every run. */
  public static final long CREATED = 1_764_400_000L;

  /** What the simulated model answers (cut to the request's {@code max_tokens}). */
  static final String ANSWER =
      "In disaggregated serving the decode worker receives the prompt's KV cache from the prefill worker"
          + " and counts it as a prefix-cache hit, so the usage it reports is wrong.";

  private OpenAiWire() {}

  /** How the engines' streams differ. */
  public enum Style {
    /** The first content chunk carries the role; its event ends {@code "} \n\n"} (a space before the blank line). */
    TRTLLM,
    /** vLLM 0.32's members ({@link VllmWire}): a first chunk with the role and empty content, then one chunk per token. */
    VLLM,
    /** A first chunk with the role and empty content, then one chunk per token, with OpenAI's members only. */
    SGLANG
  }

  /** The JSON object of a request body. */
  public static ObjectNode parseRequest(byte[] body) throws BadRequest {
    try {
      JsonNode node = JSON.readTree(body);
      if (node instanceof ObjectNode object) {
        return object;
      }
    } catch (java.io.IOException e) {
      throw new BadRequest("request body is not JSON: " + e.getMessage());
    }
    throw new BadRequest("request body is not a JSON object");
  }

  /** The request's chat messages. */
  public static List<Message> messages(JsonNode request) throws BadRequest {
    JsonNode messages = request.path("messages");
    if (!messages.isArray() || messages.isEmpty()) {
      throw new BadRequest("messages: expected a non-empty array");
    }
    List<Message> out = new ArrayList<>();
    for (JsonNode m : messages) {
      out.add(new Message(m.path("role").asText("user"), m.path("content").asText("")));
    }
    return out;
  }

  /**
   * The prompt's tokens: a chat request's messages as the chat template renders them, or a completions request's
   * {@code prompt} text after a begin marker (a tokenizer's BOS).
   */
  public static int[] prompt(WordTokenizer tokenizer, JsonNode request) throws BadRequest {
    if (request.has("messages") || !request.has("prompt")) {
      return tokenizer.encodeChat(messages(request));
    }
    JsonNode prompt = request.path("prompt");
    if (!prompt.isTextual()) {
      throw new BadRequest("prompt: expected a string");
    }
    int[] text = tokenizer.encode(prompt.asText());
    int[] tokens = new int[text.length + 1];
    tokens[0] = WordTokenizer.BEGIN_OF_TEXT;
    System.arraycopy(text, 0, tokens, 1, text.length);
    return tokens;
  }

  /** The client request as JSON, as the orchestrator received it. */
  static ObjectNode clientBody(ClientRequest request) {
    ObjectNode body = JSON.createObjectNode();
    body.put("model", request.model());
    var messages = body.putArray("messages");
    for (Message m : request.messages()) {
      messages.addObject().put("role", m.role()).put("content", m.content());
    }
    body.put("max_tokens", request.maxTokens());
    body.put("stream", request.stream());
    if (request.stream()) {
      body.putObject("stream_options").put("include_usage", true);
    }
    return body;
  }

  /** An OpenAI usage object with the prompt-token details the engines report. */
  public static ObjectNode usage(long prompt, long completion, long cached) {
    ObjectNode usage = JSON.createObjectNode();
    usage.put("prompt_tokens", prompt).put("total_tokens", prompt + completion).put("completion_tokens", completion);
    usage.putObject("prompt_tokens_details").put("cached_tokens", cached);
    return usage;
  }

  /** A {@code chat.completion} with one choice; callers add their engine's extra fields. */
  static ObjectNode chatCompletion(String id, String model, String content, String finishReason, ObjectNode usage) {
    return chatCompletion(id, model, 1, content, finishReason, usage);
  }

  /** A {@code chat.completion} with {@code choices} equal choices (the simulated model is deterministic). */
  public static ObjectNode chatCompletion(
      String id, String model, int choices, String content, String finishReason, ObjectNode usage) {
    ObjectNode body = JSON.createObjectNode();
    body.put("id", id).put("object", "chat.completion").put("created", CREATED).put("model", model);
    var array = body.putArray("choices");
    for (int index = 0; index < choices; index++) {
      ObjectNode choice = array.addObject();
      choice.put("index", index);
      choice.putObject("message").put("role", "assistant").put("content", content);
      choice.putNull("logprobs");
      choice.put("finish_reason", finishReason);
    }
    body.set("usage", usage);
    return body;
  }

  /**
   * A worker's whole answer of {@code pieces} per choice, as {@code shape} asks: JSON, or a stream of
   * chunks (each content chunk with the running usage when continuous usage is asked), a usage chunk
   * when usage is asked, and {@code [DONE]}.
   *
   * @param prompt the prompt tokens the usage reports
   * @param cached the cached tokens the usage reports
   */
  public static WorkerReply answer(
      Style style, String id, String model, List<String> pieces, String finishReason, long prompt, long cached,
      AnswerShape shape, TokenCounts truth) {
    return answer(style, id, model, pieces, finishReason, prompt, cached, 0, shape, truth);
  }

  /**
   * {@link #answer(Style, String, String, List, String, long, long, AnswerShape, TokenCounts)} by a worker that
   * wrote {@code createdCache} prompt tokens to its prefix cache (vLLM reports them).
   */
  public static WorkerReply answer(
      Style style, String id, String model, List<String> pieces, String finishReason, long prompt, long cached,
      long createdCache, AnswerShape shape, TokenCounts truth) {
    if (style == Style.VLLM) {
      return VllmWire.answer(id, model, pieces, finishReason, prompt, cached, createdCache, shape, truth);
    }
    int choices = shape.choices();
    long completion = (long) pieces.size() * choices;
    if (!shape.stream()) {
      ObjectNode body = chatCompletion(id, model, choices, String.join("", pieces), finishReason, usage(prompt, completion, cached));
      return new WorkerReply(200, JSON_TYPE, bytes(body), truth);
    }
    List<ObjectNode> events = new ArrayList<>();
    long produced = 0;
    if (style == Style.SGLANG) {
      for (int index = 0; index < choices; index++) {
        events.add(withRunningUsage(chunk(id, model, index, delta(true, ""), null), shape, prompt, 0, cached));
      }
    }
    for (int i = 0; i < pieces.size(); i++) {
      boolean last = i == pieces.size() - 1;
      for (int index = 0; index < choices; index++) {
        produced++;
        ObjectNode chunk = chunk(id, model, index, delta(style == Style.TRTLLM && i == 0, pieces.get(i)), last ? finishReason : null);
        events.add(withRunningUsage(chunk, shape, prompt, produced, cached));
      }
    }
    if (shape.includeUsage()) {
      ObjectNode usageChunk = JSON.createObjectNode();
      usageChunk.put("id", id).put("object", "chat.completion.chunk").put("created", CREATED).put("model", model);
      usageChunk.putArray("choices");
      usageChunk.set("usage", usage(prompt, completion, cached));
      events.add(usageChunk);
    }
    return new WorkerReply(200, SSE_TYPE, sse(events, style == Style.TRTLLM), truth);
  }

  /**
   * {@code events} as a server-sent event stream ending with {@code [DONE]}; with {@code spaceAfterFirst}
   * the first event ends {@code "} \n\n"}, as TensorRT-LLM writes it.
   */
  static byte[] sse(List<ObjectNode> events, boolean spaceAfterFirst) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (int i = 0; i < events.size(); i++) {
      out.writeBytes(utf8("data: "));
      out.writeBytes(bytes(events.get(i)));
      out.writeBytes(utf8(spaceAfterFirst && i == 0 ? " \n\n" : "\n\n"));
    }
    out.writeBytes(utf8("data: [DONE]\n\n"));
    return out.toByteArray();
  }

  private static ObjectNode withRunningUsage(ObjectNode chunk, AnswerShape shape, long prompt, long produced, long cached) {
    if (shape.continuousUsage()) {
      chunk.set("usage", usage(prompt, produced, cached));
    }
    return chunk;
  }

  private static ObjectNode delta(boolean withRole, String content) {
    ObjectNode delta = JSON.createObjectNode();
    if (withRole) {
      delta.put("role", "assistant");
    }
    return delta.put("content", content);
  }

  private static ObjectNode chunk(String id, String model, int index, ObjectNode delta, String finishReason) {
    ObjectNode chunk = JSON.createObjectNode();
    chunk.put("id", id).put("object", "chat.completion.chunk").put("created", CREATED).put("model", model);
    ObjectNode choice = chunk.putArray("choices").addObject();
    choice.put("index", index);
    choice.set("delta", delta);
    choice.putNull("logprobs");
    choice.put("finish_reason", finishReason);
    return chunk;
  }

  public static byte[] bytes(JsonNode node) {
    try {
      return JSON.writeValueAsBytes(node);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("a JSON tree always serialises", e);
    }
  }

  public static byte[] utf8(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }

  /** The answer's tokens, at most {@code maxTokens} of them. */
  public static List<String> answerPieces(WordTokenizer tokenizer, int maxTokens) {
    List<String> pieces = tokenizer.pieces(ANSWER);
    return List.copyOf(pieces.subList(0, Math.max(1, Math.min(maxTokens, pieces.size()))));
  }

  /** {@code length} when the answer was cut by {@code max_tokens}, else {@code stop}. */
  public static String finishReason(WordTokenizer tokenizer, int produced) {
    return produced < tokenizer.pieces(ANSWER).size() ? "length" : "stop";
  }
}
