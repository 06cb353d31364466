package io.disaggusage.extproc.classify;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.ByteArrayOutputStream;
import java.io.IOException;

/**
 * TensorRT-LLM's {@code disaggregated_params.ctx_usage} object written out as compact JSON while a
 * request-body reader walks it, token by token, up to a byte cap. Both body formats write the same
 * tokens here, so the cap cuts at the same point whatever the encoding. Created at the object's
 * opening brace, which it writes itself.
 */
final class CtxUsageCapture {
  /** Where the capture stands after a token. */
  enum Step {
    /** More tokens to come. */
    MORE,
    /** The object closed: {@link #json()} holds it. */
    DONE,
    /** Above the cap: too large to be a usage object, dropped. */
    OVERSIZE
  }

  private final int maxBytes;
  private final ByteArrayOutputStream out = new ByteArrayOutputStream(256);
  private final JsonGenerator generator;
  private int levels = 1;

  CtxUsageCapture(JsonFactory json, int maxBytes) throws IOException {
    this.maxBytes = maxBytes;
    this.generator = json.createGenerator(out);
    generator.writeStartObject();
  }

  /** Where the reader writes each token of the object. */
  JsonGenerator generator() {
    return generator;
  }

  /**
   * After one token was written.
   *
   * @param levelChange +1 for a token that opens an object or array, -1 for one that closes it, else 0
   */
  Step wrote(int levelChange) throws IOException {
    levels += levelChange;
    generator.flush();
    if (out.size() > maxBytes) {
      return Step.OVERSIZE;
    }
    if (levels == 0) {
      generator.close();
      return Step.DONE;
    }
    return Step.MORE;
  }

  byte[] json() {
    return out.toByteArray();
  }
}
