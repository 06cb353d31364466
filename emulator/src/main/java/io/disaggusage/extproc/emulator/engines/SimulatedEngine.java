package io.disaggusage.extproc.emulator.engines;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.emulator.engines.WorkerReply.TokenCounts;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What both simulated families' workers do alike: read the chat (or completions) request, prefill the prompt through the
 * context worker's prefix cache and report that truthfully, and answer on the generation worker with the
 * family's cached count for the {@link UsageVariant} (the bug, or the fixed release's count). Subclasses
 * supply the family's markers, ids, handoff fields and stream style. A request a worker cannot read gets
 * an HTTP 400 like the engines answer.
 */
abstract class SimulatedEngine implements DisaggEngine {
  final WordTokenizer tokenizer = new WordTokenizer();
  final UsageVariant variant;
  private final PrefixCache contextCache;

  SimulatedEngine(PrefixCache contextCache, UsageVariant variant) {
    this.contextCache = contextCache;
    this.variant = variant;
  }

  /** Refuses a request that is not a context call of this family. */
  abstract void requireContextCall(JsonNode request) throws BadRequest;

  /** Refuses a request that is not a generation call of this family. */
  abstract void requireGenerationCall(JsonNode request) throws BadRequest;

  /** The {@code id} of a response to {@code call}. */
  abstract String responseId(WorkerCall call, JsonNode request, boolean context);

  /**
   * Adds what the orchestrator hands from the context reply to the generation call.
   *
   * @param cached the context worker's own prefix-cache count
   */
  abstract void addHandoff(ObjectNode reply, WorkerCall call, JsonNode request, int[] prompt, int cached);

  /** The cached count the generation worker reports for a transferred prompt of {@code prompt} tokens. */
  abstract long reportedCached(JsonNode request, int prompt);

  /** The prompt count the generation worker reports; its own count unless the fix takes the context's. */
  long reportedPrompt(JsonNode request, int prompt) {
    return prompt;
  }

  abstract OpenAiWire.Style style();

  /** The context worker's JSON answer of one token, before {@link #addHandoff}. */
  ObjectNode contextReply(String id, String model, String token, int prompt, int cached) {
    return OpenAiWire.chatCompletion(id, model, token, "length", OpenAiWire.usage(prompt, 1, cached));
  }

  /** The prompt tokens the generation worker counts; the chat prompt unless the family sends ids. */
  int generationPrompt(JsonNode request) throws BadRequest {
    return OpenAiWire.prompt(tokenizer, request).length;
  }

  @Override
  public final WorkerReply context(WorkerCall call) {
    try {
      ObjectNode request = OpenAiWire.parseRequest(call.body());
      requireContextCall(request);
      int[] prompt = OpenAiWire.prompt(tokenizer, request);
      int cached = contextCache.prefill(prompt);
      ObjectNode reply = contextReply(
          responseId(call, request, true), request.path("model").asText(), OpenAiWire.answerPieces(tokenizer, 1).get(0),
          prompt.length, cached);
      addHandoff(reply, call, request, prompt, cached);
      return new WorkerReply(200, OpenAiWire.JSON_TYPE, OpenAiWire.bytes(reply), new TokenCounts(prompt.length, cached, 1));
    } catch (BadRequest e) {
      return e.reply();
    }
  }

  @Override
  public final WorkerReply generation(WorkerCall call) {
    try {
      ObjectNode request = OpenAiWire.parseRequest(call.body());
      requireGenerationCall(request);
      int prompt = generationPrompt(request);
      AnswerShape shape = AnswerShape.of(request);
      List<String> pieces = OpenAiWire.answerPieces(tokenizer, shape.maxTokens());
      return OpenAiWire.answer(
          style(), responseId(call, request, false), request.path("model").asText(), pieces,
          OpenAiWire.finishReason(tokenizer, pieces.size()), reportedPrompt(request, prompt),
          reportedCached(request, prompt), shape, new TokenCounts(prompt, 0, (long) pieces.size() * shape.choices()));
    } catch (BadRequest e) {
      return e.reply();
    }
  }

  int blockTokens() {
    return contextCache.blockTokens();
  }

  /** A JSON POST to the chat completions path with {@code headers} after the content type. */
  static WorkerCall jsonCall(ObjectNode body, Map<String, String> headers) {
    Map<String, String> all = new LinkedHashMap<>();
    all.put("content-type", OpenAiWire.JSON_TYPE);
    all.putAll(headers);
    return new WorkerCall("/v1/chat/completions", all, OpenAiWire.bytes(body));
  }

  /** A JSON body the simulation wrote itself. */
  static JsonNode read(byte[] json) {
    try {
      return OpenAiWire.JSON.readTree(json);
    } catch (java.io.IOException e) {
      throw new IllegalStateException("a simulated worker wrote JSON it cannot read", e);
    }
  }
}
