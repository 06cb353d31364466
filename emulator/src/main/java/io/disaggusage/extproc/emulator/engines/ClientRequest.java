package io.disaggusage.extproc.emulator.engines;

import com.fasterxml.jackson.databind.JsonNode;
import io.disaggusage.extproc.emulator.engines.WordTokenizer.Message;
import java.util.List;

/**
 * A chat completion request as the client sends it to the orchestrator.
 *
 * @param stream whether the client streams (it then asks for the usage chunk)
 */
public record ClientRequest(String model, List<Message> messages, int maxTokens, boolean stream) {
  public ClientRequest {
    messages = List.copyOf(messages);
  }

  /**
   * The request in a client's chat completion body: {@code model}, the text of each message,
   * {@code max_completion_tokens} or {@code max_tokens} ({@code defaultMaxTokens} without either) and
   * {@code stream}. Other fields are not kept: the simulated orchestrators build their worker calls
   * from these alone.
   */
  public static ClientRequest fromJson(byte[] body, String defaultModel, int defaultMaxTokens) throws BadRequest {
    JsonNode request = OpenAiWire.parseRequest(body);
    JsonNode maxTokens = request.has("max_completion_tokens") ? request.get("max_completion_tokens") : request.path("max_tokens");
    if (!maxTokens.isMissingNode() && !(maxTokens.canConvertToInt() && maxTokens.asInt() > 0)) {
      throw new BadRequest("max_tokens: expected a positive integer");
    }
    return new ClientRequest(
        request.path("model").asText(defaultModel),
        OpenAiWire.messages(request),
        maxTokens.asInt(defaultMaxTokens),
        request.path("stream").asBoolean(false));
  }
}
