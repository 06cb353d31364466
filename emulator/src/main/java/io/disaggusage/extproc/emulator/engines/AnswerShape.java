package io.disaggusage.extproc.emulator.engines;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * What a chat completion request asks of the answer's form: how many choices, how many tokens at most,
 * streamed or not, and which usage a stream carries.
 *
 * @param includeUsage a stream ends with a usage chunk
 * @param continuousUsage every streamed content chunk carries the running usage (vLLM, TRT-LLM)
 */
public record AnswerShape(int choices, int maxTokens, boolean stream, boolean includeUsage, boolean continuousUsage) {
  /** {@code max_tokens} when a request has none: enough for the simulated model's whole answer. */
  public static final int DEFAULT_MAX_TOKENS = 64;

  /**
   * The shape {@code request} asks for. {@code max_completion_tokens} wins over {@code max_tokens}, as
   * the engines read them. Once the client sends {@code stream_options} at all, {@code include_usage}
   * defaults to true: the engines' {@code StreamOptions} models (TensorRT-LLM, vLLM, SGLang) say so.
   */
  public static AnswerShape of(JsonNode request) throws BadRequest {
    JsonNode limit = request.has("max_completion_tokens") ? request.get("max_completion_tokens") : request.path("max_tokens");
    if (!limit.isMissingNode() && !limit.isNull() && !(limit.canConvertToInt() && limit.asInt() > 0)) {
      throw new BadRequest("max_tokens: expected a positive integer");
    }
    JsonNode n = request.path("n");
    if (!n.isMissingNode() && !n.isNull() && !(n.canConvertToInt() && n.asInt() > 0)) {
      throw new BadRequest("n: expected a positive integer");
    }
    JsonNode options = request.path("stream_options");
    boolean includeUsage = options.path("include_usage").asBoolean(options.isObject());
    return new AnswerShape(
        n.asInt(1),
        limit.asInt(DEFAULT_MAX_TOKENS),
        request.path("stream").asBoolean(false),
        includeUsage,
        includeUsage && options.path("continuous_usage_stats").asBoolean(false));
  }

  /** The same shape cut to {@code maxTokens}: a prefill worker produces only the first token. */
  public AnswerShape capped(int tokens) {
    return new AnswerShape(choices, Math.min(maxTokens, tokens), stream, includeUsage, continuousUsage);
  }
}
