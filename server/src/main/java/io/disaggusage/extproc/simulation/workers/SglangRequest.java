package io.disaggusage.extproc.simulation.workers;

import com.fasterxml.jackson.databind.JsonNode;
import io.disaggusage.extproc.simulation.engines.AnswerShape;
import io.disaggusage.extproc.simulation.engines.BadRequest;
import io.disaggusage.extproc.simulation.engines.OpenAiWire;
import io.disaggusage.extproc.simulation.engines.WordTokenizer;
import java.util.ArrayList;
import java.util.List;

/**
 * A chat completion as the SGLang router sends it to both workers: the client's body plus
 * {@code bootstrap_host}, {@code bootstrap_port} and {@code bootstrap_room} (one room, or an array of
 * exactly one room per choice, as the router sends for {@code n > 1}).
 *
 * @param bootstrapPort null when the router sent none
 */
record SglangRequest(
    JsonNode body, String model, int[] prompt, AnswerShape shape, String bootstrapHost, Integer bootstrapPort,
    List<Long> rooms) {

  static SglangRequest parse(byte[] bytes, WordTokenizer tokenizer) throws BadRequest {
    JsonNode body = OpenAiWire.parseRequest(bytes);
    int[] prompt = tokenizer.encodeChat(OpenAiWire.messages(body));
    AnswerShape shape = AnswerShape.of(body, false);
    JsonNode room = body.path("bootstrap_room");
    List<Long> rooms = new ArrayList<>();
    for (JsonNode r : room.isArray() ? room : List.of(room)) {
      if (!r.isIntegralNumber() || !r.canConvertToLong() || r.asLong() < 0) {
        throw new BadRequest("bootstrap_room: expected a non-negative int64 or an array of them");
      }
      rooms.add(r.asLong());
    }
    if (room.isArray() && rooms.size() != shape.choices()) {
      throw new BadRequest("bootstrap_room: expected an array of one room per choice (n=" + shape.choices() + ")");
    }
    JsonNode host = body.path("bootstrap_host");
    JsonNode port = body.path("bootstrap_port");
    return new SglangRequest(
        body, body.path("model").asText(""), prompt, shape, host.isTextual() ? host.asText() : null,
        port.canConvertToInt() ? port.asInt() : null, List.copyOf(rooms));
  }

  /** SGLang names a response after its request id; the first room stands in for the random rid. */
  String responseId() {
    return "chatcmpl-" + Long.toHexString(rooms.get(0));
  }
}
