package io.disaggusage.extproc.testkit;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessageFormat;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.ValueType;

/**
 * MessagePack request bodies for tests, made with msgpack-core from JSON documents, the way
 * TensorRT-LLM's orchestrator makes them (msgspec over {@code model_dump(mode="json")}): member order
 * and duplicate members kept, integers exact (int64 and uint64), floats as floats. Each {@link Style}
 * spells the same document with different header formats, so together they cover every format a
 * JSON-shaped document can use. {@link #toJson} goes the other way, for differential checks.
 */
public final class MsgpackBodies {
  private MsgpackBodies() {}

  private static final BigInteger UINT64_MAX = BigInteger.ONE.shiftLeft(64).subtract(BigInteger.ONE);
  private static final JsonFactory JSON =
      JsonFactory.builder()
          .streamReadConstraints(
              StreamReadConstraints.builder().maxNestingDepth(5000).maxNumberLength(10_000).build())
          .build();

  /** How headers are spelled. */
  public enum Style {
    /** The smallest form of every value, as msgpack-core and msgspec write it (fixint, fixstr, str8, …). */
    COMPACT,
    /** 16-bit lengths and counts (str16, map16, array16), signed ints as int16/int32, exact floats as float32. */
    MID,
    /** 32-bit lengths and counts (str32, map32, array32), every integer as int64 (uint64 above it). */
    WIDE
  }

  /** A JSON integer outside MessagePack's range (int64 min to uint64 max). */
  public static final class NotRepresentable extends RuntimeException {
    NotRepresentable(String what) {
      super(what);
    }
  }

  public static byte[] fromJson(String json, Style style) {
    return fromJson(json.getBytes(StandardCharsets.UTF_8), style);
  }

  /** The MessagePack spelling of one JSON document. */
  public static byte[] fromJson(byte[] json, Style style) {
    try (JsonParser p = JSON.createParser(json); MessageBufferPacker out = MessagePack.newDefaultBufferPacker()) {
      p.nextToken();
      pack(p, out, style);
      if (p.nextToken() != null) {
        throw new IllegalArgumentException("trailing content after the JSON document");
      }
      return out.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static void pack(JsonParser p, MessageBufferPacker out, Style style) throws IOException {
    switch (p.currentToken()) {
      case START_OBJECT, START_ARRAY -> {
        boolean object = p.currentToken() == JsonToken.START_OBJECT;
        try (MessageBufferPacker items = MessagePack.newDefaultBufferPacker()) {
          long n = 0;
          JsonToken t;
          while ((t = p.nextToken()) != JsonToken.END_OBJECT && t != JsonToken.END_ARRAY) {
            if (t == JsonToken.FIELD_NAME) {
              string(items, p.currentName(), style);
              p.nextToken();
            }
            pack(p, items, style);
            n++;
          }
          container(out, object, n, style);
          out.writePayload(items.toByteArray());
        }
      }
      case VALUE_STRING -> string(out, p.getText(), style);
      case VALUE_NUMBER_INT -> integer(out, p.getBigIntegerValue(), style);
      case VALUE_NUMBER_FLOAT -> floating(out, p.getDoubleValue(), style);
      case VALUE_TRUE -> out.packBoolean(true);
      case VALUE_FALSE -> out.packBoolean(false);
      case VALUE_NULL -> out.packNil();
      default -> throw new IllegalArgumentException("unexpected " + p.currentToken());
    }
  }

  private static void container(MessageBufferPacker out, boolean map, long n, Style style) throws IOException {
    switch (style) {
      case COMPACT -> {
        if (map) {
          out.packMapHeader((int) n);
        } else {
          out.packArrayHeader((int) n);
        }
      }
      case MID -> raw(out, map ? 0xde : 0xdc, n, 2);
      case WIDE -> raw(out, map ? 0xdf : 0xdd, n, 4);
    }
  }

  private static void string(MessageBufferPacker out, String s, Style style) throws IOException {
    byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
    switch (style) {
      case COMPACT -> out.packString(s);
      case MID -> {
        if (utf8.length < 65536) {
          raw(out, 0xda, utf8.length, 2);
        } else {
          raw(out, 0xdb, utf8.length, 4);
        }
        out.writePayload(utf8);
      }
      case WIDE -> {
        raw(out, 0xdb, utf8.length, 4);
        out.writePayload(utf8);
      }
    }
  }

  private static void integer(MessageBufferPacker out, BigInteger v, Style style) throws IOException {
    if (v.compareTo(BigInteger.valueOf(Long.MIN_VALUE)) < 0 || v.compareTo(UINT64_MAX) > 0) {
      throw new NotRepresentable("integer " + v);
    }
    if (v.bitLength() > 63) {
      out.packBigInteger(v); // uint64 above Long.MAX_VALUE: there is only one spelling
      return;
    }
    long l = v.longValue();
    switch (style) {
      case COMPACT -> out.packLong(l);
      case MID -> {
        if (l == (short) l) {
          raw(out, 0xd1, l, 2);
        } else if (l == (int) l) {
          raw(out, 0xd2, l, 4);
        } else {
          raw(out, 0xd3, l, 8);
        }
      }
      case WIDE -> raw(out, 0xd3, l, 8);
    }
  }

  private static void floating(MessageBufferPacker out, double d, Style style) throws IOException {
    if (style == Style.MID && (double) (float) d == d) {
      out.packFloat((float) d);
    } else {
      out.packDouble(d);
    }
  }

  /** Writes a document by hand with a packer. */
  @FunctionalInterface
  public interface Packing {
    void write(MessageBufferPacker p) throws IOException;
  }

  /** The bytes a hand-written document packs to. */
  public static byte[] pack(Packing packing) {
    try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
      packing.write(p);
      return p.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Where {@code text}'s UTF-8 bytes first start in an encoded body (a name's or string's payload). */
  public static int indexOf(byte[] body, String text) {
    byte[] t = text.getBytes(StandardCharsets.UTF_8);
    for (int i = 0; i + t.length <= body.length; i++) {
      if (Arrays.equals(body, i, i + t.length, t, 0, t.length)) {
        return i;
      }
    }
    throw new IllegalArgumentException("not in the body: " + text);
  }

  /** A format byte and a big-endian value of {@code bytes} bytes. */
  public static void raw(MessageBufferPacker out, int format, long value, int bytes) throws IOException {
    byte[] b = new byte[1 + bytes];
    b[0] = (byte) format;
    for (int i = bytes; i >= 1; i--) {
      b[i] = (byte) value;
      value >>>= 8;
    }
    out.writePayload(b);
  }

  /**
   * The JSON spelling of a MessagePack document, members in order, duplicates kept; null when JSON
   * cannot express it (a key that is not a string, bin or ext values, a non-finite float, bytes after
   * the first value, invalid UTF-8).
   *
   * @param longestString out: {@code [0]} gets the longest string's UTF-8 length (keys included)
   */
  public static String toJson(byte[] msgpack, int[] longestString) {
    ByteArrayOutputStream json = new ByteArrayOutputStream();
    try (MessageUnpacker in = MessagePack.newDefaultUnpacker(msgpack);
        JsonGenerator out = JSON.createGenerator(json)) {
      Decoding d = new Decoding(in, out, msgpack.length);
      if (!in.hasNext() || !d.value() || in.hasNext()) {
        return null;
      }
      out.flush();
      longestString[0] = d.longest;
    } catch (IOException | RuntimeException e) {
      return null;
    }
    return json.toString(StandardCharsets.UTF_8);
  }

  /** One MessagePack document written out as JSON. */
  private static final class Decoding {
    final MessageUnpacker in;
    final JsonGenerator out;
    final int size;
    int longest;

    Decoding(MessageUnpacker in, JsonGenerator out, int size) {
      this.in = in;
      this.out = out;
      this.size = size;
    }

    boolean value() throws IOException {
      MessageFormat f = in.getNextFormat();
      switch (f.getValueType()) {
        case MAP -> {
          int n = in.unpackMapHeader();
          out.writeStartObject();
          for (int i = 0; i < n; i++) {
            if (in.getNextFormat().getValueType() != ValueType.STRING) {
              return false;
            }
            out.writeFieldName(string());
            if (!value()) {
              return false;
            }
          }
          out.writeEndObject();
        }
        case ARRAY -> {
          int n = in.unpackArrayHeader();
          out.writeStartArray();
          for (int i = 0; i < n; i++) {
            if (!value()) {
              return false;
            }
          }
          out.writeEndArray();
        }
        case STRING -> out.writeString(string());
        case INTEGER -> out.writeNumber(in.unpackBigInteger());
        case FLOAT -> {
          double d = in.unpackDouble();
          if (!Double.isFinite(d)) {
            return false;
          }
          if (f == MessageFormat.FLOAT32) {
            out.writeNumber((float) d);
          } else {
            out.writeNumber(d);
          }
        }
        case BOOLEAN -> out.writeBoolean(in.unpackBoolean());
        case NIL -> {
          in.unpackNil();
          out.writeNull();
        }
        default -> {
          return false; // bin, ext
        }
      }
      return true;
    }

    /** A str value, decoded strictly; a length beyond the document is refused before any allocation. */
    String string() throws IOException {
      int length = in.unpackRawStringHeader();
      if (length > size - in.getTotalReadBytes()) {
        throw new IOException("a string longer than the rest of the document");
      }
      longest = Math.max(longest, length);
      return StandardCharsets.UTF_8.newDecoder().decode(ByteBuffer.wrap(in.readPayload(length))).toString();
    }
  }
}
