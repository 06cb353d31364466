package io.disaggusage.extproc.inject;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.ByteArrayOutputStream;
import java.io.IOException;

/**
 * Takes the usage-only events out of an SSE stream: the final {@code {"choices":[],"usage":{...}}}
 * chunk an OpenAI-compatible engine sends because the request asked for usage. An event is removed
 * when it has only {@code data:} lines, its data is one JSON object, every {@code choices} member of
 * that object is an empty array (there is at least one) and its last {@code usage} member is an
 * object. Every other byte passes unchanged, in order.
 *
 * <p>The start of each event is held only until it is certain not to be removed: in a content event
 * that is as soon as its {@code "choices":[} is followed by anything but {@code ]}, or as soon as a
 * line that is not {@code data:} appears, or the data does not start with <code>{</code>. A candidate
 * is held to its end (at most {@code maxEventBytes}, beyond which it passes) and then parsed in full.
 * The output is the same for every chunking of the input.
 *
 * <p>Not thread-safe: one instance per response body.
 */
public final class UsageEventRemover {
  private static final byte[] DATA = {'d', 'a', 't', 'a'};

  // Where a line is: its field name, the space after "data:", a data value, another field's value.
  private static final int NAME = 0;
  private static final int SPACE = 1;
  private static final int DATA_VALUE = 2;
  private static final int OTHER_VALUE = 3;

  private final JsonFactory json;
  private final int maxEventBytes;
  private final ChunkRouter router = new ChunkRouter();
  private long base;

  private boolean lineStart = true;
  private boolean afterCr;
  /** The removed event ended with CR: a LF right after it belongs to its terminator. */
  private boolean dropLf;
  private boolean inEvent;
  private int field;
  private int nameLength;
  private boolean nameIsData;
  private int dataLines;

  /** The current event is held (it may be a usage-only event); false once it is certain it is not. */
  private boolean candidate;
  private final ChoicesProbe probe = new ChoicesProbe();
  private final ByteArrayOutputStream payload = new ByteArrayOutputStream();
  private int removed;

  public UsageEventRemover(JsonFactory json, int maxEventBytes) {
    this.json = json;
    this.maxEventBytes = maxEventBytes;
  }

  /** How many events were removed so far. */
  public int removed() {
    return removed;
  }

  /** Reads the next bytes of the stream; returns what may go out now (the same array when unchanged). */
  public byte[] filter(byte[] bytes) {
    router.begin(bytes);
    for (int i = 0; i < bytes.length; i++) {
      read(bytes[i], i);
    }
    router.route(bytes.length);
    if (candidate && router.heldBytes() > maxEventBytes) {
      keep(); // far larger than a usage chunk
    }
    base += bytes.length;
    return router.end();
  }

  /**
   * The stream ended: an unterminated last event is judged as it is (removed when it is a usage-only
   * event). Returns the bytes still to go out.
   */
  public byte[] finish() {
    if (inEvent && candidate && removable()) {
      router.drop();
      removed++;
    }
    return abandon();
  }

  /** Gives up: the held bytes, unchanged. */
  public byte[] abandon() {
    candidate = false;
    inEvent = false;
    return router.holding() ? router.takeHeld() : new byte[0];
  }

  private void read(byte b, int i) {
    if (dropLf) {
      dropLf = false;
      if (b == '\n') {
        router.route(i);
        router.skip(i + 1);
        afterCr = false;
        return;
      }
    }
    if (afterCr) {
      afterCr = false;
      if (b == '\n') {
        return; // the second byte of a CRLF line end
      }
    }
    if (b == '\r' || b == '\n') {
      afterCr = b == '\r';
      lineEnd(i);
      return;
    }
    if (lineStart) {
      lineStart = false;
      if (!inEvent) {
        startEvent(i);
      }
      field = NAME;
      nameLength = 0;
      nameIsData = true;
    }
    switch (field) {
      case NAME -> {
        if (b == ':') {
          if (nameIsData && nameLength == DATA.length) {
            field = SPACE;
            dataLineStarts();
          } else {
            field = OTHER_VALUE;
            keep(i); // an event with other fields is never a usage chunk
          }
        } else {
          nameIsData &= nameLength < DATA.length && DATA[nameLength] == b;
          nameLength++;
        }
      }
      case SPACE -> {
        field = DATA_VALUE;
        if (b != ' ') {
          payload(b, i);
        }
      }
      case DATA_VALUE -> payload(b, i);
      default -> {} // another field's value
    }
  }

  private void lineEnd(int i) {
    if (lineStart) {
      if (inEvent) {
        endEvent(i);
      }
      return; // a blank line between events passes
    }
    lineStart = true;
    if (field == NAME) {
      if (nameIsData && nameLength == DATA.length) {
        dataLineStarts(); // "data" alone: an empty data line
      } else {
        keep(i);
      }
    }
  }

  private void startEvent(int i) {
    inEvent = true;
    candidate = true;
    dataLines = 0;
    payload.reset();
    probe.reset();
    router.route(i);
    router.hold(base + i);
  }

  private void dataLineStarts() {
    if (dataLines++ > 0 && candidate) {
      payload.write('\n'); // data lines are joined by a newline
      probe.read((byte) '\n');
    }
  }

  private void payload(byte b, int i) {
    if (!candidate) {
      return;
    }
    payload.write(b);
    if (probe.read(b) == ChoicesProbe.NOT_USAGE_ONLY) {
      keep(i);
    }
  }

  /** The current event is not removed: what is held goes out, the rest of it passes. */
  private void keep(int i) {
    if (candidate) {
      router.route(i);
      keep();
    }
  }

  private void keep() {
    candidate = false;
    router.release();
    payload.reset();
  }

  private void endEvent(int i) {
    router.route(i + 1);
    if (candidate && removable()) {
      router.drop();
      removed++;
      dropLf = afterCr;
    } else {
      router.release();
    }
    inEvent = false;
    candidate = false;
    payload.reset();
  }

  /** The full check of a held event's data: a JSON object with empty {@code choices} and a usage object. */
  private boolean removable() {
    try (JsonParser p = json.createParser(payload.toByteArray())) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        return false;
      }
      boolean emptyChoices = false;
      boolean usage = false;
      JsonToken t;
      while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        JsonToken value = p.nextToken();
        if ("choices".equals(name)) {
          if (value != JsonToken.START_ARRAY || p.nextToken() != JsonToken.END_ARRAY) {
            return false;
          }
          emptyChoices = true;
        } else {
          usage = "usage".equals(name) ? value == JsonToken.START_OBJECT : usage;
          p.skipChildren();
        }
      }
      return t == JsonToken.END_OBJECT && p.nextToken() == null && emptyChoices && usage;
    } catch (IOException | RuntimeException e) {
      return false; // not JSON: not a usage chunk
    }
  }
}
