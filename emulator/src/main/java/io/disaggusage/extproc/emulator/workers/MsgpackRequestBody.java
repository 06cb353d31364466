package io.disaggusage.extproc.emulator.workers;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.emulator.engines.BadRequest;
import io.disaggusage.extproc.emulator.engines.OpenAiWire;
import java.io.IOException;
import java.util.Locale;
import org.msgpack.core.MessageFormat;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.ValueType;

/**
 * A TensorRT-LLM worker's MessagePack request body as the JSON document it stands for. Since PR #16873
 * {@code trtllm-serve disaggregated} sends every worker request as msgspec MessagePack of
 * {@code model_dump(mode="json")} with {@code X-TRTLLM-Msgpack: 1} (the content type stays JSON), and the
 * worker's route class decodes it before validation; a worker that read only JSON would refuse every call
 * of a current orchestrator. {@code mode="json"} leaves only JSON types, so binary and extension values
 * are refused; integers stay exact (a {@code disagg_request_id} is above 2^53).
 */
final class MsgpackRequestBody {
  /** The header whose value {@code 1} marks a MessagePack body. */
  static final String HEADER = "x-trtllm-msgpack";

  private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

  private MsgpackRequestBody() {}

  /** Whether {@code request} says its body is MessagePack. */
  static boolean marks(RecordedRequest request) {
    return request.headerValues(HEADER).contains("1");
  }

  /** The JSON bytes of a MessagePack body holding one document and nothing after it. */
  static byte[] toJson(byte[] msgpack) throws BadRequest {
    try (MessageUnpacker in = MessagePack.newDefaultUnpacker(msgpack)) {
      JsonNode document = value(in);
      if (in.hasNext()) {
        throw new BadRequest("MessagePack body: bytes after the document");
      }
      return OpenAiWire.bytes(document);
    } catch (IOException | RuntimeException e) {
      throw new BadRequest("MessagePack body cannot be read: " + e.getMessage());
    }
  }

  private static JsonNode value(MessageUnpacker in) throws IOException, BadRequest {
    MessageFormat format = in.getNextFormat();
    ValueType type = format.getValueType();
    switch (type) {
      case NIL -> {
        in.unpackNil();
        return NODES.nullNode();
      }
      case BOOLEAN -> {
        return NODES.booleanNode(in.unpackBoolean());
      }
      case INTEGER -> {
        // uint64 may exceed a long; every other integer format fits one
        return format == MessageFormat.UINT64 ? NODES.numberNode(in.unpackBigInteger()) : NODES.numberNode(in.unpackLong());
      }
      case FLOAT -> {
        return NODES.numberNode(in.unpackDouble());
      }
      case STRING -> {
        return NODES.textNode(in.unpackString());
      }
      case ARRAY -> {
        int size = in.unpackArrayHeader();
        ArrayNode array = NODES.arrayNode(size);
        for (int i = 0; i < size; i++) {
          array.add(value(in));
        }
        return array;
      }
      case MAP -> {
        int size = in.unpackMapHeader();
        ObjectNode object = NODES.objectNode();
        for (int i = 0; i < size; i++) {
          if (in.getNextFormat().getValueType() != ValueType.STRING) {
            throw new BadRequest("MessagePack body: a map key that is not a string");
          }
          String key = in.unpackString();
          object.set(key, value(in));
        }
        return object;
      }
      default -> throw new BadRequest("MessagePack body: " + type.name().toLowerCase(Locale.ROOT) + " values are not JSON");
    }
  }
}
