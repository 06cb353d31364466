package io.disaggusage.extproc.classify;

import com.fasterxml.jackson.core.JsonFactory;
import java.nio.ByteBuffer;

/**
 * Reads the classification facts out of a request body as its chunks arrive, without holding the
 * body. The encoding is chosen once, from the request head and the body's first byte ({@link
 * #forRequest}); both encodings give the same {@link RequestFacts} for the same logical document.
 */
public interface RequestBodyReader {
  /**
   * TensorRT-LLM's orchestrator (since PR #16873) sends worker request bodies as MessagePack and says
   * so with this header, keeping {@code content-type: application/json}. Its workers decode MessagePack
   * exactly when the value is {@code 1}; so does the service.
   */
  String MSGPACK_HEADER = "x-trtllm-msgpack";

  /** Reads one chunk. The buffer is read, not kept. */
  void feed(ByteBuffer chunk);

  /** The body ended (or the service stops reading it): what was read so far decides. */
  void end();

  /** The facts read so far; {@code malformed} once the body cannot be one object of its encoding. */
  RequestFacts facts();

  /**
   * Whether the request's {@link #MSGPACK_HEADER} named an encoding its body is not in (a client's
   * header on a JSON body): the body was read as what it is.
   */
  default boolean headerContradicted() {
    return false;
  }

  /**
   * The reader for a request's body: JSON, unless the request says {@code x-trtllm-msgpack: 1} and the
   * body starts as a MessagePack map ({@link SniffingRequestBodyReader}).
   *
   * @param maxCaptureBytes cap on the captured {@code ctx_usage} object, as compact JSON
   */
  static RequestBodyReader forRequest(RequestHead head, JsonFactory json, int maxCaptureBytes) {
    String msgpack = head.header(MSGPACK_HEADER);
    return msgpack != null && msgpack.trim().equals("1")
        ? new SniffingRequestBodyReader(json, maxCaptureBytes)
        : new RequestBodyScanner(json, maxCaptureBytes);
  }
}
