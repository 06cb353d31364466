package io.disaggusage.extproc.classify;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.async.ByteBufferFeeder;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.UsageDocument;
import io.disaggusage.extproc.usage.UsageRule;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * Reads the classification facts out of a request body as its chunks arrive, with Jackson's
 * non-blocking parser: the body is never held, only the values of interest are (plus whatever single
 * token Jackson is in the middle of). Only the top two levels are examined; the one object captured
 * whole is TensorRT-LLM's {@code disaggregated_params.ctx_usage}, bounded by {@code maxCaptureBytes}.
 */
public final class RequestBodyScanner {
  private final JsonFactory factory;
  private final int maxCaptureBytes;
  private final JsonParser parser;
  private final ByteBufferFeeder feeder;

  private int depth;
  private String field1;
  private String field2;
  private boolean malformed;
  /** Lexer state across chunks: inside a string, after a backslash in one, a comma held back. */
  private boolean inString;
  private boolean escaped;
  private boolean heldComma;
  private boolean rootDone;
  private boolean finished;

  private String model;
  private Boolean stream;
  private String requestType;
  private String disaggRequestId;
  private String ctxRequestId;
  private String scheduleStyle;
  private ContextUsage ctxUsage;
  private boolean remoteDecode;
  private boolean remotePrefill;
  private String bootstrapRoom;
  private String bootstrapHost;
  private boolean bootstrapBatched;

  private ByteArrayOutputStream captured;
  private JsonGenerator capture;
  private int captureDepth;

  public RequestBodyScanner(JsonFactory factory, int maxCaptureBytes) {
    this.factory = factory;
    this.maxCaptureBytes = maxCaptureBytes;
    try {
      this.parser = factory.createNonBlockingByteBufferParser();
    } catch (IOException e) {
      throw new IllegalStateException("Jackson non-blocking parser unavailable", e);
    }
    this.feeder = (ByteBufferFeeder) parser.getNonBlockingInputFeeder();
  }

  /**
   * Scans one chunk. The buffer is read, not kept.
   *
   * <p>Jackson's non-blocking parser accepts a trailing comma in an object ({@code {"a":1,}}) when a
   * chunk ends right after the comma, and rejects it otherwise; the facts would then depend on where
   * Envoy cut the body. So a comma that ends a chunk outside a string (whitespace after it aside) is
   * held back and fed with the next chunk; the whitespace after it is insignificant and dropped. A
   * minimal lexer (strings and escapes only) tells string content from structure; it agrees with the
   * parser on every prefix the parser accepts.
   */
  public void feed(ByteBuffer chunk) {
    if (malformed || finished || !chunk.hasRemaining()) {
      return;
    }
    try {
      int start = chunk.position();
      int end = chunk.limit();
      int trailingComma = -1;
      int firstStructure = -1;
      for (int i = start; i < end; i++) {
        byte b = chunk.get(i);
        if (inString) {
          trailingComma = -1;
          if (escaped) {
            escaped = false;
          } else if (b == '\\') {
            escaped = true;
          } else if (b == '"') {
            inString = false;
          }
        } else if (b == '"') {
          inString = true;
          trailingComma = -1;
        } else if (b == ',') {
          trailingComma = i;
        } else if (b != ' ' && b != '\t' && b != '\n' && b != '\r') {
          trailingComma = -1;
        } else {
          continue; // whitespace outside strings
        }
        if (firstStructure < 0) {
          firstStructure = i;
        }
      }
      int cut = trailingComma >= 0 ? trailingComma : end;
      ByteBuffer bytes = chunk.duplicate().position(start).limit(cut);
      if (heldComma) {
        if (firstStructure < 0) {
          chunk.position(end);
          return; // whitespace only: the comma stays held
        }
        if (firstStructure == trailingComma) {
          malformed = true; // "," then only another "," outside strings: never valid JSON
          return;
        }
        // The held comma goes in one buffer with what follows it, never alone at a buffer's end.
        ByteBuffer joined = ByteBuffer.allocate(1 + cut - start);
        joined.put((byte) ',').put(bytes).flip();
        bytes = joined;
      }
      heldComma = trailingComma >= 0;
      if (bytes.hasRemaining()) {
        feedBytes(bytes);
      }
      chunk.position(end);
    } catch (IOException | RuntimeException e) {
      malformed = true;
    }
  }

  private void feedBytes(ByteBuffer bytes) throws IOException {
    if (malformed || finished) {
      return;
    }
    feeder.feedInput(bytes);
    drain();
  }

  /** The body ended. */
  public void end() {
    if (finished) {
      return;
    }
    finished = true;
    if (malformed) {
      return;
    }
    try {
      if (heldComma) {
        heldComma = false;
        malformed = true; // the body ended right after a comma outside strings
        return;
      }
      feeder.endOfInput();
      drain();
      if (depth != 0) {
        malformed = true;
      }
    } catch (IOException | RuntimeException e) {
      malformed = true;
    }
  }

  public RequestFacts facts() {
    return new RequestFacts(
        model,
        stream,
        requestType,
        disaggRequestId,
        ctxRequestId,
        scheduleStyle,
        ctxUsage,
        remoteDecode,
        remotePrefill,
        bootstrapRoom,
        bootstrapHost,
        bootstrapBatched,
        malformed);
  }

  private void drain() throws IOException {
    JsonToken token;
    while ((token = parser.nextToken()) != null && token != JsonToken.NOT_AVAILABLE) {
      if (capture != null) {
        capturing(token);
        continue;
      }
      switch (token) {
        case START_OBJECT, START_ARRAY -> {
          if (depth == 0 && (token != JsonToken.START_OBJECT || rootDone)) {
            malformed = true;
            finished = true;
            return;
          }
          if (depth == 1 && token == JsonToken.START_ARRAY && "bootstrap_room".equals(field1)) {
            bootstrapBatched = true;
          }
          if (depth == 2
              && token == JsonToken.START_OBJECT
              && "disaggregated_params".equals(field1)
              && "ctx_usage".equals(field2)) {
            startCapture();
          }
          depth++;
        }
        case END_OBJECT, END_ARRAY -> {
          depth--;
          rootDone = depth == 0;
        }
        case FIELD_NAME -> {
          if (depth == 1) {
            field1 = parser.currentName();
            field2 = null;
          } else if (depth == 2) {
            field2 = parser.currentName();
          }
        }
        default -> {
          if (depth == 0) {
            malformed = true; // a scalar at the top level: not a JSON object body
            finished = true;
            return;
          }
          scalar(token);
        }
      }
    }
  }

  private void scalar(JsonToken token) throws IOException {
    if (depth == 1) {
      switch (field1) {
        case "model" -> model = token == JsonToken.VALUE_STRING ? parser.getText() : null;
        case "stream" -> stream = token == JsonToken.VALUE_TRUE ? Boolean.TRUE : token == JsonToken.VALUE_FALSE ? Boolean.FALSE : null;
        case "bootstrap_room" -> bootstrapRoom = idText(token);
        case "bootstrap_host" -> bootstrapHost = token == JsonToken.VALUE_STRING ? parser.getText() : null;
        default -> {}
      }
    } else if (depth == 2 && field2 != null) {
      if ("disaggregated_params".equals(field1)) {
        switch (field2) {
          case "request_type" -> requestType = token == JsonToken.VALUE_STRING ? parser.getText() : null;
          case "disagg_request_id" -> disaggRequestId = idText(token);
          case "ctx_request_id" -> ctxRequestId = idText(token);
          case "schedule_style" -> scheduleStyle = idText(token);
          default -> {}
        }
      } else if ("kv_transfer_params".equals(field1)) {
        switch (field2) {
          case "do_remote_decode" -> remoteDecode = token == JsonToken.VALUE_TRUE;
          case "do_remote_prefill" -> remotePrefill = token == JsonToken.VALUE_TRUE;
          default -> {}
        }
      }
    }
  }

  /** Integer ids keep their exact decimal spelling; string ids their text; anything else is no id. */
  private String idText(JsonToken token) throws IOException {
    return token == JsonToken.VALUE_NUMBER_INT || token == JsonToken.VALUE_STRING
        ? parser.getText()
        : null;
  }

  private void startCapture() throws IOException {
    captured = new ByteArrayOutputStream(256);
    capture = factory.createGenerator(captured);
    capture.writeStartObject();
    captureDepth = 1;
  }

  private void capturing(JsonToken token) throws IOException {
    capture.copyCurrentEvent(parser);
    if (token == JsonToken.START_OBJECT || token == JsonToken.START_ARRAY) {
      captureDepth++;
    } else if (token == JsonToken.END_OBJECT || token == JsonToken.END_ARRAY) {
      captureDepth--;
    }
    capture.flush();
    if (captured.size() > maxCaptureBytes) {
      // Too large to be a usage object: stop capturing, keep counting the levels still open.
      capture = null;
      captured = null;
      depth = 2 + captureDepth;
      return;
    }
    if (captureDepth == 0) {
      depth = 2;
      capture.close();
      ctxUsage = parseCtxUsage(captured.toByteArray());
      capture = null;
      captured = null;
    }
  }

  private ContextUsage parseCtxUsage(byte[] usageJson) {
    byte[] doc = new byte[usageJson.length + 10];
    System.arraycopy("{\"usage\":".getBytes(), 0, doc, 0, 9);
    System.arraycopy(usageJson, 0, doc, 9, usageJson.length);
    doc[doc.length - 1] = '}';
    try {
      var parsed = UsageDocument.parse(factory, doc);
      return parsed.usage() == null ? null : UsageRule.context(parsed.usage(), doc).orElse(null);
    } catch (UsageDocument.MalformedException e) {
      return null;
    }
  }
}
