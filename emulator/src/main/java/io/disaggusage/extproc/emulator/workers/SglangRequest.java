package io.disaggusage.extproc.emulator.workers;

import com.fasterxml.jackson.databind.JsonNode;
import io.disaggusage.extproc.emulator.engines.AnswerShape;
import io.disaggusage.extproc.emulator.engines.BadRequest;
import io.disaggusage.extproc.emulator.engines.OpenAiWire;
import io.disaggusage.extproc.emulator.engines.WordTokenizer;
import java.util.ArrayList;
import java.util.List;

/**
 * A chat completion as the SGLang router sends it to both workers: the client's body plus
 * {@code bootstrap_host}, {@code bootstrap_port} and {@code bootstrap_room}, each one value, or (as the
 * router sends them for {@code n > 1}) an array of exactly one value per choice.
 *
 * @param rooms one per choice, or one for all
 */
record SglangRequest(String model, int[] prompt, AnswerShape shape, List<Room> rooms) {

  /**
   * One room and where its prefill's bootstrap listener is.
   *
   * @param host null when the router sent none
   * @param port null when the router sent none
   */
  record Room(long id, String host, Integer port) {}

  static SglangRequest parse(byte[] bytes, WordTokenizer tokenizer) throws BadRequest {
    JsonNode body = OpenAiWire.parseRequest(bytes);
    int[] prompt = OpenAiWire.prompt(tokenizer, body);
    AnswerShape shape = AnswerShape.of(body);
    List<JsonNode> ids = perChoice(body, "bootstrap_room", shape.choices());
    List<JsonNode> hosts = perChoice(body, "bootstrap_host", ids.size());
    List<JsonNode> ports = perChoice(body, "bootstrap_port", ids.size());
    List<Room> rooms = new ArrayList<>();
    for (int i = 0; i < ids.size(); i++) {
      JsonNode id = ids.get(i);
      if (!id.isIntegralNumber() || !id.canConvertToLong() || id.asLong() < 0) {
        throw new BadRequest("bootstrap_room: expected a non-negative int64 or an array of them");
      }
      JsonNode host = hosts.get(ids.size() == hosts.size() ? i : 0);
      JsonNode port = ports.get(ids.size() == ports.size() ? i : 0);
      rooms.add(new Room(id.asLong(), host.isTextual() ? host.asText() : null, port.canConvertToInt() ? port.asInt() : null));
    }
    return new SglangRequest(body.path("model").asText(""), prompt, shape, List.copyOf(rooms));
  }

  /** The field's value, or its array's values, which must then be {@code count}. */
  private static List<JsonNode> perChoice(JsonNode body, String field, int count) throws BadRequest {
    JsonNode value = body.path(field);
    if (!value.isArray()) {
      return List.of(value);
    }
    if (value.size() != count) {
      throw new BadRequest(field + ": expected an array of one value per choice (" + count + ")");
    }
    List<JsonNode> values = new ArrayList<>();
    value.forEach(values::add);
    return values;
  }

  /** SGLang names a response after its request id; the first room stands in for the random rid. */
  String responseId() {
    return "chatcmpl-" + Long.toHexString(rooms.get(0).id());
  }
}
