package io.disaggusage.extproc.classify;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.usage.UsageDocument;
import java.nio.ByteBuffer;

/**
 * The {@link PromptFingerprint} the service computes for one whole request body, for code outside the
 * service (tests, tools) that checks whether two legs of a flow bind to each other: the same readers the
 * service runs on a leg's body, fed the body in one piece.
 */
public final class PromptFingerprints {
  private PromptFingerprints() {}

  /**
   * The fingerprint of {@code body}, JSON or (when {@code msgpack}, as a request with {@code
   * x-trtllm-msgpack: 1} is read) MessagePack; null for a malformed body or one without a
   * prompt-bearing member (such a leg is unbound).
   */
  public static PromptFingerprint of(byte[] body, boolean msgpack) {
    JsonFactory json = UsageDocument.newFactory(body.length);
    RequestBodyReader reader =
        msgpack ? new MsgpackRequestScanner(json, body.length) : new RequestBodyScanner(json, body.length);
    reader.feed(ByteBuffer.wrap(body));
    reader.end();
    return reader.facts().fingerprint();
  }
}
