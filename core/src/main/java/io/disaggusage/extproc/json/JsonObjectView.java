package io.disaggusage.extproc.json;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.math.BigInteger;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/**
 * Where the members of one JSON object sit in a byte array, read with a blocking Jackson parser over
 * the whole document. Offsets let a caller patch single values without re-serialising anything else.
 * Duplicate keys: the last one wins, as in common JSON parsers.
 */
public final class JsonObjectView {

  /**
   * One member's value: its token kind, its byte range {@code [start, end)} in the document, its exact
   * integer value when it is an integer, and its own view when it is an object that was asked for.
   */
  public record Member(
      String name, JsonToken kind, int start, int end, BigInteger integer, JsonObjectView object) {

    public boolean isNull() {
      return kind == JsonToken.VALUE_NULL;
    }

    /** True for a JSON integer ≥ 0 (not a float, not a string, not negative). */
    public boolean isNonNegativeInteger() {
      return integer != null && integer.signum() >= 0;
    }
  }

  private final int start;
  private final int closingBrace;
  private final Map<String, Member> members;

  private JsonObjectView(int start, int closingBrace, Map<String, Member> members) {
    this.start = start;
    this.closingBrace = closingBrace;
    this.members = Collections.unmodifiableMap(members);
  }

  /**
   * Reads the object whose {@code START_OBJECT} the parser is on, leaving the parser on its
   * {@code END_OBJECT}. Members named in {@code nested} that are objects get views of their own.
   */
  public static JsonObjectView read(JsonParser parser, Set<String> nested) throws IOException {
    int start = offset(parser.currentTokenLocation().getByteOffset());
    Map<String, Member> members = new LinkedHashMap<>();
    JsonToken token;
    while ((token = parser.nextToken()) == JsonToken.FIELD_NAME) {
      String name = parser.currentName();
      JsonToken kind = parser.nextToken();
      int valueStart = offset(parser.currentTokenLocation().getByteOffset());
      BigInteger integer = null;
      JsonObjectView object = null;
      if (kind == JsonToken.VALUE_NUMBER_INT) {
        integer = parser.getBigIntegerValue();
      } else if (kind == JsonToken.START_OBJECT && nested.contains(name)) {
        object = read(parser, Set.of());
      } else if (kind == JsonToken.START_OBJECT || kind == JsonToken.START_ARRAY) {
        parser.skipChildren();
      } else if (kind == JsonToken.VALUE_STRING) {
        parser.finishToken(); // a string is read lazily: without this its end is not known
      }
      int valueEnd = offset(parser.currentLocation().getByteOffset());
      members.remove(name); // keep document order of the effective (last) occurrence
      members.put(name, new Member(name, kind, valueStart, valueEnd, integer, object));
    }
    if (token != JsonToken.END_OBJECT) {
      throw new IOException("unexpected token " + token + " in object");
    }
    int closingBrace = offset(parser.currentTokenLocation().getByteOffset());
    return new JsonObjectView(start, closingBrace, members);
  }

  private static int offset(long byteOffset) throws IOException {
    if (byteOffset < 0 || byteOffset > Integer.MAX_VALUE) {
      throw new IOException("byte offsets unavailable");
    }
    return (int) byteOffset;
  }

  /** Offset of the opening brace. */
  public int start() {
    return start;
  }

  /** Offset of the closing brace: where new members are inserted. */
  public int closingBrace() {
    return closingBrace;
  }

  /** Offset just past the closing brace. */
  public int end() {
    return closingBrace + 1;
  }

  public boolean isEmpty() {
    return members.isEmpty();
  }

  public Member get(String name) {
    return members.get(name);
  }

  public boolean has(String name) {
    return members.containsKey(name);
  }

  public Map<String, Member> members() {
    return members;
  }
}
