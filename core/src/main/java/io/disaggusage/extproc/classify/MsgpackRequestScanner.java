package io.disaggusage.extproc.classify;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import io.disaggusage.extproc.classify.RequestFactsBuilder.Kind;
import io.disaggusage.extproc.classify.RequestFactsBuilder.Open;
import java.io.IOException;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.util.Arrays;
import org.msgpack.core.MessageFormat;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.ImmutableValue;
import org.msgpack.value.IntegerValue;
import org.msgpack.value.ValueType;

/**
 * Reads the classification facts out of a MessagePack request body (TensorRT-LLM's orchestrator,
 * {@code x-trtllm-msgpack: 1}) as its chunks arrive. It sends {@link RequestFactsBuilder} the same
 * events the JSON reader sends for the same logical document, so the facts are the same.
 *
 * <p>Why a push tokenizer and not msgpack-core's {@link MessageUnpacker} alone: the unpacker pulls
 * from a {@code MessageBufferInput}, and when the input runs dry inside a value it fails
 * ({@code MessageInsufficientBufferException}) with no way to resume or rewind. Envoy delivers the
 * body chunk by chunk, cut anywhere, and holding it whole is what this service must not do (a
 * {@code prompt_token_ids} array alone can be megabytes). So this class frames the stream itself:
 * the format byte (classified by msgpack-core's {@link MessageFormat}), the header's length or count,
 * and the nesting. Only the few values it keeps — member names at the top two levels, the values of
 * facts, and everything inside {@code disaggregated_params.ctx_usage} — are collected whole, header and
 * payload, and decoded by a {@link MessageUnpacker}; every other value is counted past, never copied.
 *
 * <p>Memory: one item count per open container (at most the JSON factory's nesting limit, as for
 * JSON), a nine-byte header, one kept value (a name: 20 bytes; a fact's string: {@code
 * maxCaptureBytes} or {@value #MIN_FACT_BYTES} bytes, whichever is larger; a string in {@code ctx_usage}:
 * {@code maxCaptureBytes}), and the captured {@code ctx_usage} as JSON up to {@code maxCaptureBytes}.
 * Nothing depends on the body's size.
 *
 * <p>The body must be one map with string keys, which is what msgspec writes for TensorRT-LLM's
 * {@code model_dump(mode="json")}. A key that is not a string, nesting deeper than the JSON limit,
 * the never-used format byte {@code 0xc1}, invalid UTF-8 in a string that is read, a body that ends
 * inside a value, and any byte after the root map make it malformed; the facts read up to there are
 * kept, as the JSON reader keeps them. Where the two readers can differ, always outside what
 * TensorRT-LLM sends: a string that is not read is not checked for UTF-8 (Jackson checks every
 * string), a fact whose string is longer than its bound above reads as absent (Jackson reads strings
 * up to its own limit), and bin and ext values, which JSON cannot express, are never a fact
 * and make a {@code ctx_usage} that contains one unusable.
 *
 * <p>The prompt fingerprint ({@link PromptFingerprinter}) gets the same events as from the JSON
 * reader; the payload of a string it hashes streams into the hasher chunk by chunk, which keeps at
 * most {@value CanonicalHasher#INLINE_MAX} bytes of it.
 */
public final class MsgpackRequestScanner implements RequestBodyReader {
  /** Strings that are read must be valid UTF-8: {@code asString()} reports, never replaces. */
  private static final MessagePack.UnpackerConfig UNPACKER = new MessagePack.UnpackerConfig();

  private static final int MAX_HEADER_BYTES = 9;
  /** Every real fact string (model name, id, request type) is far shorter, whatever the usage cap. */
  static final int MIN_FACT_BYTES = 4096;

  private final JsonFactory json;
  private final int maxCaptureBytes;
  private final int maxFactBytes;
  private final int maxDepth;
  private final RequestFactsBuilder facts;
  private final PromptFingerprinter fingerprint = new PromptFingerprinter();
  /** The str/bin/ext payload being read streams into the fingerprint as it arrives. */
  private boolean payloadFingerprinted;

  /** Items still to come in each open container; a map counts its keys and its values. */
  private long[] remaining = new long[8];
  private boolean[] isMap = new boolean[8];
  private int depth;

  /** The value being read: its format, header (format byte first), and what is still missing. */
  private MessageFormat format;
  private final byte[] header = new byte[MAX_HEADER_BYTES];
  private int headerLength;
  private int headerMissing;
  private long payloadMissing;
  private boolean key;
  /** A str/bin/ext value kept whole (header then payload) for decoding; null when counted past. */
  private byte[] kept;
  private int keptLength;

  private CtxUsageCapture capture;
  /** The capture met a value JSON cannot express (bin, ext): the usage it ends up with is unusable. */
  private boolean captureUnusable;

  private boolean rootDone;
  private boolean malformed;
  private boolean finished;

  public MsgpackRequestScanner(JsonFactory json, int maxCaptureBytes) {
    this.json = json;
    this.maxCaptureBytes = maxCaptureBytes;
    this.maxFactBytes = Math.max(maxCaptureBytes, MIN_FACT_BYTES);
    this.maxDepth = json.streamReadConstraints().getMaxNestingDepth();
    this.facts = new RequestFactsBuilder(json);
  }

  @Override
  public void feed(ByteBuffer chunk) {
    if (malformed || finished) {
      return;
    }
    try {
      int i = chunk.position();
      int end = chunk.limit();
      while (i < end && !malformed) {
        if (payloadMissing > 0) {
          int n = (int) Math.min(payloadMissing, end - i);
          if (kept != null) {
            chunk.get(i, kept, keptLength, n);
            keptLength += n;
          }
          if (payloadFingerprinted) {
            // The chunk's own bounds, moved and put back: no view allocated per chunk.
            chunk.limit(i + n).position(i);
            fingerprint.bytes(chunk);
            chunk.limit(end);
          }
          i += n;
          payloadMissing -= n;
          if (payloadMissing == 0) {
            payloadRead();
          }
        } else if (headerMissing > 0) {
          header[headerLength++] = chunk.get(i++);
          if (--headerMissing == 0) {
            headerRead();
          }
        } else {
          startValue(chunk.get(i++));
        }
      }
      chunk.position(end);
    } catch (IOException | RuntimeException e) {
      malformed = true;
    }
  }

  @Override
  public void end() {
    if (finished) {
      return;
    }
    finished = true;
    if (!malformed && (depth > 0 || headerMissing > 0 || payloadMissing > 0)) {
      malformed = true; // the body ended inside a value
    }
  }

  @Override
  public RequestFacts facts() {
    return facts.facts(malformed, fingerprint.fingerprint(finished && !malformed));
  }

  // ---------------------------------------------------------------------------------------------
  // Framing

  private void startValue(byte b) throws IOException {
    format = MessageFormat.valueOf(b);
    if (rootDone || format == MessageFormat.NEVER_USED || (depth == 0 && format.getValueType() != ValueType.MAP)) {
      malformed = true; // a second document, an invalid byte, or a root that is not a map
      return;
    }
    key = depth > 0 && isMap[depth - 1] && remaining[depth - 1] % 2 == 0;
    header[0] = b;
    headerLength = 1;
    headerMissing = extraHeaderBytes(format);
    if (headerMissing == 0) {
      headerRead();
    }
  }

  /** Header bytes after the format byte: length, count, value, or an ext's length and type. */
  private static int extraHeaderBytes(MessageFormat f) {
    return switch (f) {
      case UINT8, INT8, STR8, BIN8, FIXEXT1, FIXEXT2, FIXEXT4, FIXEXT8, FIXEXT16 -> 1;
      case UINT16, INT16, STR16, BIN16, ARRAY16, MAP16, EXT8 -> 2;
      case EXT16 -> 3;
      case UINT32, INT32, FLOAT32, STR32, BIN32, ARRAY32, MAP32 -> 4;
      case EXT32 -> 5;
      case UINT64, INT64, FLOAT64 -> 8;
      default -> 0; // fixint, fixmap, fixarray, fixstr, nil, bool
    };
  }

  private void headerRead() throws IOException {
    ValueType type = format.getValueType();
    if (key && type != ValueType.STRING) {
      malformed = true; // not a JSON-shaped document: a map key that is not a string
      return;
    }
    switch (type) {
      case MAP -> openContainer(true, count());
      case ARRAY -> openContainer(false, count());
      case STRING, BINARY, EXTENSION -> startPayload(type, payloadLength());
      default -> scalarRead(type);
    }
  }

  /** Entries of a map or elements of an array. */
  private long count() {
    return switch (format) {
      case FIXMAP, FIXARRAY -> header[0] & 0x0f;
      default -> unsigned(1, headerLength - 1);
    };
  }

  /** Payload bytes of a str, bin or ext value. */
  private long payloadLength() {
    return switch (format) {
      case FIXSTR -> header[0] & 0x1f;
      case FIXEXT1 -> 1;
      case FIXEXT2 -> 2;
      case FIXEXT4 -> 4;
      case FIXEXT8 -> 8;
      case FIXEXT16 -> 16;
      case EXT8, EXT16, EXT32 -> unsigned(1, headerLength - 2); // the type byte follows the length
      default -> unsigned(1, headerLength - 1);
    };
  }

  private long unsigned(int from, int bytes) {
    long v = 0;
    for (int k = from; k < from + bytes; k++) {
      v = v << 8 | (header[k] & 0xff);
    }
    return v;
  }

  private void openContainer(boolean map, long items) throws IOException {
    if (depth >= maxDepth) {
      malformed = true; // the same nesting limit as the JSON reader's
      return;
    }
    Open open = facts.open(map);
    fingerprint.startContainer(map);
    if (capture != null) {
      if (map) {
        capture.generator().writeStartObject();
      } else {
        capture.generator().writeStartArray();
      }
      captured(1);
    } else if (open == Open.CTX_USAGE) {
      capture = new CtxUsageCapture(json, maxCaptureBytes);
      captureUnusable = false;
    }
    if (depth == remaining.length) {
      remaining = Arrays.copyOf(remaining, Math.min(depth * 2, maxDepth));
      isMap = Arrays.copyOf(isMap, remaining.length);
    }
    remaining[depth] = map ? 2 * items : items;
    isMap[depth] = map;
    depth++;
    if (items == 0) {
      closeContainer();
      itemDone();
    }
  }

  /** The current item of the innermost container is complete: close every container it completes. */
  private void itemDone() throws IOException {
    while (depth > 0 && --remaining[depth - 1] == 0) {
      closeContainer();
    }
    if (depth == 0) {
      rootDone = true;
    }
  }

  private void closeContainer() throws IOException {
    depth--;
    facts.close();
    fingerprint.endContainer();
    if (capture != null) {
      if (isMap[depth]) {
        capture.generator().writeEndObject();
      } else {
        capture.generator().writeEndArray();
      }
      captured(-1);
    }
  }

  private void startPayload(ValueType type, long length) throws IOException {
    boolean read =
        type == ValueType.STRING
            && (capture != null || (key ? facts.wantsName() : facts.wantsText()));
    // Names outside ctx_usage only need to be compared with the facts' names.
    long limit =
        capture != null ? maxCaptureBytes : key ? RequestFactsBuilder.MAX_NAME_BYTES : maxFactBytes;
    kept = null;
    if (read && length <= limit) {
      kept = new byte[headerLength + (int) length];
      System.arraycopy(header, 0, kept, 0, headerLength);
      keptLength = headerLength;
    }
    payloadFingerprinted = fingerprint.hashing();
    if (payloadFingerprinted) {
      switch (type) {
        case STRING -> fingerprint.startString(length);
        case BINARY -> fingerprint.startBinary(length);
        default -> fingerprint.startExtension(header[headerLength - 1], length); // the type byte ends an ext header
      }
    }
    payloadMissing = length;
    if (length == 0) {
      payloadRead();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Values

  /** A str, bin or ext value is complete. */
  private void payloadRead() throws IOException {
    ValueType type = format.getValueType();
    String text = kept == null ? null : decode(kept, keptLength).asStringValue().asString();
    kept = null;
    if (payloadFingerprinted) {
      payloadFingerprinted = false;
      fingerprint.endString();
    } else if (key) {
      fingerprint.name(text); // null (a name too long to be a fact's) matches no member either
    }
    if (type == ValueType.STRING) {
      if (capture != null) {
        captureText(text);
      }
      if (key) {
        facts.name(text);
      } else {
        facts.scalar(Kind.STRING, text);
      }
    } else {
      if (capture != null) {
        captureUnusable = true;
        capture.generator().writeNull(); // keeps the captured JSON well-formed until the object ends
        captured(0);
      }
      facts.scalar(Kind.OTHER, null);
    }
    itemDone();
  }

  /** A name or string inside ctx_usage; null when it was longer than the cap, and so is the object. */
  private void captureText(String text) throws IOException {
    if (text == null) {
      capture = null; // too large to be a usage object; the scan goes on
      return;
    }
    if (key) {
      capture.generator().writeFieldName(text);
    } else {
      capture.generator().writeString(text);
    }
    captured(0);
  }

  /** A nil, boolean, integer or float: the header is the whole value. */
  private void scalarRead(ValueType type) throws IOException {
    Kind kind =
        switch (type) {
          case BOOLEAN -> header[0] == (byte) 0xc3 ? Kind.TRUE : Kind.FALSE;
          case INTEGER -> Kind.INTEGER;
          default -> Kind.OTHER;
        };
    String text = null;
    if (capture != null) {
      writeScalar(type, kind);
    }
    if (kind == Kind.INTEGER && facts.wantsText()) {
      text = decode(header, headerLength).asIntegerValue().toBigInteger().toString();
    }
    facts.scalar(kind, text);
    if (fingerprint.hashing()) {
      fingerprintScalar(type);
    }
    itemDone();
  }

  private void fingerprintScalar(ValueType type) throws IOException {
    switch (type) {
      case BOOLEAN -> fingerprint.bool(header[0] == (byte) 0xc3);
      case INTEGER -> {
        // Read from the header in place: no unpacker per number (a prompt of token ids has thousands).
        long n = switch (format) {
          case POSFIXINT, NEGFIXINT -> header[0]; // the byte sign-extends to the value
          case UINT8, UINT16, UINT32, UINT64 -> unsigned(1, headerLength - 1);
          default -> unsigned(1, headerLength - 1) << 8 * (9 - headerLength) >> 8 * (9 - headerLength); // int8-64
        };
        if (format == MessageFormat.UINT64 && n < 0) {
          fingerprint.integer(new BigInteger(Long.toUnsignedString(n))); // uint64 above Long.MAX_VALUE
        } else {
          fingerprint.integer(n);
        }
      }
      case FLOAT -> {
        // By value: a float32 widens to the double of exactly its value.
        fingerprint.floating(format == MessageFormat.FLOAT32
            ? Float.intBitsToFloat((int) unsigned(1, 4))
            : Double.longBitsToDouble(unsigned(1, 8)));
      }
      default -> fingerprint.nul();
    }
  }

  private void writeScalar(ValueType type, Kind kind) throws IOException {
    JsonGenerator out = capture.generator();
    switch (type) {
      case BOOLEAN -> out.writeBoolean(kind == Kind.TRUE);
      case INTEGER -> {
        IntegerValue n = decode(header, headerLength).asIntegerValue();
        if (n.isInLongRange()) {
          out.writeNumber(n.toLong());
        } else {
          out.writeNumber(n.toBigInteger()); // uint64 above Long.MAX_VALUE
        }
      }
      case FLOAT -> {
        var f = decode(header, headerLength).asFloatValue();
        if (format == MessageFormat.FLOAT32) {
          out.writeNumber(f.toFloat()); // the float's own shortest spelling, not its double widening
        } else {
          out.writeNumber(f.toDouble());
        }
      }
      default -> out.writeNull();
    }
    captured(0);
  }

  /** One token went into the capture. */
  private void captured(int levelChange) throws IOException {
    switch (capture.wrote(levelChange)) {
      case DONE -> {
        facts.ctxUsage(captureUnusable ? null : capture.json());
        capture = null;
      }
      case OVERSIZE -> capture = null; // too large to be a usage object; the scan goes on
      case MORE -> {}
    }
  }

  private static ImmutableValue decode(byte[] bytes, int length) throws IOException {
    try (MessageUnpacker unpacker = UNPACKER.newUnpacker(bytes, 0, length)) {
      return unpacker.unpackValue();
    }
  }
}
