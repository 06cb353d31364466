package io.disaggusage.extproc.classify;

import com.fasterxml.jackson.core.JsonFactory;
import java.nio.ByteBuffer;

/**
 * The reader for a request that says {@code x-trtllm-msgpack: 1}: the header is a client's to send as much
 * as an orchestrator's, and a worker that does not know it (every vLLM-family engine) reads the body as
 * JSON whatever it says. So the body's first byte decides: a MessagePack map starts with {@code 0x80}–
 * {@code 0x8f}, {@code 0xde} or {@code 0xdf}, bytes no JSON text starts with; anything else is read as
 * JSON, and the header counts as {@linkplain #headerContradicted() contradicted} when the body is
 * JSON. Nothing is buffered: the choice is made on the first byte of the first non-empty chunk.
 */
final class SniffingRequestBodyReader implements RequestBodyReader {
  private final JsonFactory json;
  private final int maxCaptureBytes;
  private RequestBodyReader chosen;
  private boolean headerContradicted;

  SniffingRequestBodyReader(JsonFactory json, int maxCaptureBytes) {
    this.json = json;
    this.maxCaptureBytes = maxCaptureBytes;
  }

  @Override
  public void feed(ByteBuffer chunk) {
    if (chosen == null) {
      if (!chunk.hasRemaining()) {
        return;
      }
      chosen = choose(chunk.get(chunk.position()));
    }
    chosen.feed(chunk);
  }

  private RequestBodyReader choose(byte first) {
    int b = first & 0xff;
    if ((b >= 0x80 && b <= 0x8f) || b == 0xde || b == 0xdf) {
      return new MsgpackRequestScanner(json, maxCaptureBytes);
    }
    headerContradicted = true;
    return new RequestBodyScanner(json, maxCaptureBytes);
  }

  @Override
  public void end() {
    if (chosen == null) {
      chosen = new MsgpackRequestScanner(json, maxCaptureBytes); // an empty body: what the header said
    }
    chosen.end();
  }

  @Override
  public RequestFacts facts() {
    return chosen == null ? RequestFacts.NONE : chosen.facts();
  }

  @Override
  public boolean headerContradicted() {
    return headerContradicted;
  }
}
