package io.disaggusage.extproc.classify;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.async.ByteBufferFeeder;
import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * Reads the classification facts out of a JSON request body as its chunks arrive, with Jackson's
 * non-blocking parser: the body is never held, only the values of interest are (plus whatever single
 * token Jackson is in the middle of). Only the top two levels are examined ({@link
 * RequestFactsBuilder}); the one object captured whole is TensorRT-LLM's {@code
 * disaggregated_params.ctx_usage}, bounded by {@code maxCaptureBytes}. The prompt fingerprint is
 * hashed from the same tokens ({@link PromptFingerprinter}) in bounded memory ({@link CanonicalHasher}).
 */
public final class RequestBodyScanner implements RequestBodyReader {
  private final JsonFactory factory;
  private final int maxCaptureBytes;
  private final JsonParser parser;
  private final ByteBufferFeeder feeder;

  private final RequestFactsBuilder facts;
  private final PromptFingerprinter fingerprint = new PromptFingerprinter();
  private boolean malformed;
  /** Lexer state across chunks: inside a string, after a backslash in one, a comma held back. */
  private boolean inString;
  private boolean escaped;
  private boolean heldComma;
  private boolean finished;
  private CtxUsageCapture capture;
  /** Strings longer than this (in chars) are hashed from Jackson's segments: see {@link Segments}. */
  private static final int JOINED_STRING_MAX = 4096;
  private Segments segments;

  public RequestBodyScanner(JsonFactory factory, int maxCaptureBytes) {
    this.factory = factory;
    this.maxCaptureBytes = maxCaptureBytes;
    try {
      this.parser = factory.createNonBlockingByteBufferParser();
    } catch (IOException e) {
      throw new IllegalStateException("Jackson non-blocking parser unavailable", e);
    }
    this.feeder = (ByteBufferFeeder) parser.getNonBlockingInputFeeder();
    this.facts = new RequestFactsBuilder(factory);
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
  @Override
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

  @Override
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
      if (facts.depth() != 0) {
        malformed = true;
      }
    } catch (IOException | RuntimeException e) {
      malformed = true;
    }
  }

  @Override
  public RequestFacts facts() {
    return facts.facts(malformed, fingerprint.fingerprint(finished && !malformed));
  }

  private void drain() throws IOException {
    JsonToken token;
    while ((token = parser.nextToken()) != null && token != JsonToken.NOT_AVAILABLE) {
      if (capture != null) {
        capturing(token);
      }
      switch (token) {
        case START_OBJECT, START_ARRAY -> {
          RequestFactsBuilder.Open open = facts.open(token == JsonToken.START_OBJECT);
          if (open == RequestFactsBuilder.Open.REFUSED) {
            malformed = true;
            finished = true;
            return;
          }
          if (open == RequestFactsBuilder.Open.CTX_USAGE) {
            capture = new CtxUsageCapture(factory, maxCaptureBytes);
          }
          fingerprint.startContainer(token == JsonToken.START_OBJECT);
        }
        case END_OBJECT, END_ARRAY -> {
          facts.close();
          fingerprint.endContainer();
        }
        case FIELD_NAME -> {
          String name = parser.currentName();
          facts.name(name);
          if (fingerprint.hashing()) {
            // The name as a String: getTextCharacters() on a name token hashed inconsistently (tests).
            fingerprint.string(name);
          } else {
            fingerprint.name(name);
          }
        }
        default -> {
          if (!facts.scalar(kind(token), facts.wantsText() ? parser.getText() : null)) {
            malformed = true; // a scalar at the top level: not a JSON object body
            finished = true;
            return;
          }
          if (fingerprint.hashing()) {
            fingerprintScalar(token);
          }
        }
      }
    }
  }

  /**
   * A long string's text as Jackson's segments: first its UTF-8 length is counted, then it is hashed,
   * never joined into one array.
   */
  private static final class Segments extends java.io.Writer {
    final PromptFingerprinter fingerprint;
    boolean counting;
    long utf8;
    char last;

    Segments(PromptFingerprinter fingerprint) {
      this.fingerprint = fingerprint;
    }

    @Override
    public void write(char[] chars, int offset, int length) {
      if (length == 0) {
        return;
      }
      if (!counting) {
        fingerprint.chars(chars, offset, length);
        return;
      }
      utf8 += Utf8.length(chars, offset, length);
      if (Character.isHighSurrogate(last) && Character.isLowSurrogate(chars[offset])) {
        utf8 -= 2; // a pair cut between two segments: counted as two lone halves, 3 + 3 bytes, not 4
      }
      last = chars[offset + length - 1];
    }

    @Override
    public void flush() {}

    @Override
    public void close() {}
  }

  /** Jackson has the token whole (its own buffer): its characters are hashed where they lie. */
  private void fingerprintScalar(JsonToken token) throws IOException {
    switch (token) {
      case VALUE_STRING -> {
        if (parser.getTextLength() <= JOINED_STRING_MAX) {
          fingerprint.string(parser.getTextCharacters(), parser.getTextOffset(), parser.getTextLength());
        } else {
          // Jackson holds a long string in segments; getTextCharacters() would join them in a copy.
          Segments s = segments == null ? segments = new Segments(fingerprint) : segments;
          s.utf8 = 0;
          s.last = 0;
          s.counting = true;
          parser.getText(s);
          fingerprint.startString(s.utf8);
          s.counting = false;
          parser.getText(s);
          fingerprint.endString();
        }
      }
      case VALUE_NUMBER_INT -> {
        JsonParser.NumberType type = parser.getNumberType();
        if (type == JsonParser.NumberType.INT || type == JsonParser.NumberType.LONG) {
          fingerprint.integer(parser.getLongValue());
        } else {
          fingerprint.integer(parser.getBigIntegerValue());
        }
      }
      case VALUE_NUMBER_FLOAT -> fingerprint.floating(parser.getDoubleValue());
      case VALUE_TRUE, VALUE_FALSE -> fingerprint.bool(token == JsonToken.VALUE_TRUE);
      default -> fingerprint.nul(); // VALUE_NULL: JSON has no other scalar
    }
  }

  private static RequestFactsBuilder.Kind kind(JsonToken token) {
    return switch (token) {
      case VALUE_STRING -> RequestFactsBuilder.Kind.STRING;
      case VALUE_NUMBER_INT -> RequestFactsBuilder.Kind.INTEGER;
      case VALUE_TRUE -> RequestFactsBuilder.Kind.TRUE;
      case VALUE_FALSE -> RequestFactsBuilder.Kind.FALSE;
      default -> RequestFactsBuilder.Kind.OTHER;
    };
  }

  private void capturing(JsonToken token) throws IOException {
    capture.generator().copyCurrentEvent(parser);
    int change =
        token == JsonToken.START_OBJECT || token == JsonToken.START_ARRAY
            ? 1
            : token == JsonToken.END_OBJECT || token == JsonToken.END_ARRAY ? -1 : 0;
    switch (capture.wrote(change)) {
      case DONE -> {
        facts.ctxUsage(capture.json());
        capture = null;
      }
      case OVERSIZE -> capture = null; // too large to be a usage object; the scan goes on
      case MORE -> {}
    }
  }
}
