package io.disaggusage.extproc.inject;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import io.disaggusage.extproc.sse.SseEvent;
import java.io.IOException;
import java.util.function.Consumer;

/**
 * The usage-only events of one SSE response whose request the service made ask for usage: the final
 * {@code {"choices":[],"usage":{...}}} chunk an OpenAI-compatible engine then sends. The SSE body
 * processors take them out of what they forward inside their own framing pass, after reading their
 * numbers; this class decides which events those are and reports once what became of them.
 *
 * <p>An event is usage-only when it has only {@code data:} lines, its data is one JSON object, every
 * {@code choices} member of that object is an empty array (there is at least one) and its last
 * {@code usage} member is an object ({@link #remove}). The start of an event still being received may
 * go out early only once it is certain not to be one ({@link #startIsNotUsageOnly}): as soon as its
 * {@code "choices":[} is followed by anything but {@code ]}, a line that is not {@code data:} appears,
 * or the data does not start with <code>{</code>.
 *
 * <p>Not thread-safe: one instance per response body.
 */
public final class InjectedUsageEvents {
  private static final byte[] DATA = {'d', 'a', 't', 'a'};

  // Where a line of the event start is: its field name, the space after "data:", a data value.
  private static final int NAME = 0;
  private static final int SPACE = 1;
  private static final int DATA_VALUE = 2;

  private final JsonFactory json;
  private final Consumer<UsageRemoval> result;
  private int removed;
  private boolean reported;

  // The start of the event being received.
  private final ChoicesProbe probe = new ChoicesProbe();
  private boolean notUsageOnly;
  private boolean lineStart;
  private boolean afterCr;
  private int field;
  private int nameLength;
  private boolean nameIsData;
  private int dataLines;

  /** {@code result} hears once, at the end of the body or when it is abandoned, what became of the event. */
  public InjectedUsageEvents(JsonFactory json, Consumer<UsageRemoval> result) {
    this.json = json;
    this.result = result;
    eventStarts();
  }

  /**
   * Whether {@code event}, complete, is a usage-only event: if so it is counted as removed, and the
   * caller forwards none of its bytes. Callers ask only about events that may carry usage
   * ({@link SseEvent#mayContainUsage}): no other event can be one, unless its {@code usage} key is
   * written with escapes, which no engine does.
   */
  public boolean remove(SseEvent event) {
    byte[] raw = event.rawArray();
    if (!event.hasData() || !event.onlyDataLines() || (raw.length > 0 && raw[0] == (byte) 0xEF)) {
      return false; // another field, or a byte-order mark before the first field name
    }
    if (!usageOnly(event)) {
      return false;
    }
    removed++;
    return true;
  }

  /** A new event starts being received: {@link #startIsNotUsageOnly} reads it from its first byte. */
  public void eventStarts() {
    probe.reset();
    notUsageOnly = false;
    lineStart = true;
    afterCr = false;
    dataLines = 0;
  }

  /**
   * Reads the next bytes {@code b[from, to)} of the event being received, its first bytes first;
   * true once they show it is not a usage-only event (then the caller reads no more of it here).
   */
  public boolean startIsNotUsageOnly(byte[] b, int from, int to) {
    for (int i = from; i < to && !notUsageOnly; i++) {
      read(b[i]);
    }
    return notUsageOnly;
  }

  /** The body ended and everything was forwarded: the result is reported (once). */
  public void ended() {
    report(removed > 0 ? UsageRemoval.REMOVED : UsageRemoval.ABSENT);
  }

  /** The exchange was abandoned: held bytes go out unfiltered, so the event leaked unless removed. */
  public void abandoned() {
    report(removed > 0 ? UsageRemoval.REMOVED : UsageRemoval.LEAKED);
  }

  private void report(UsageRemoval removal) {
    if (!reported) {
      reported = true;
      result.accept(removal);
    }
  }

  private void read(byte b) {
    if (afterCr) {
      afterCr = false;
      if (b == '\n') {
        return; // the second byte of a CRLF line end
      }
    }
    if (b == '\r' || b == '\n') {
      afterCr = b == '\r';
      lineEnd();
      return;
    }
    if (lineStart) {
      lineStart = false;
      field = NAME;
      nameLength = 0;
      nameIsData = true;
    }
    switch (field) {
      case NAME -> {
        if (b == ':') {
          if (isData()) {
            field = SPACE;
            dataLineStarts();
          } else {
            notUsageOnly = true; // an event with other fields is never a usage chunk
          }
        } else {
          nameIsData &= nameLength < DATA.length && DATA[nameLength] == b;
          nameLength++;
        }
      }
      case SPACE -> {
        field = DATA_VALUE;
        if (b != ' ') {
          payload(b);
        }
      }
      default -> payload(b);
    }
  }

  private boolean isData() {
    return nameIsData && nameLength == DATA.length;
  }

  private void lineEnd() {
    if (lineStart) {
      return; // the blank line that ends the event: it is complete, and judged by remove()
    }
    lineStart = true;
    if (field == NAME) {
      if (isData()) {
        dataLineStarts(); // "data" alone: an empty data line
      } else {
        notUsageOnly = true;
      }
    }
  }

  private void dataLineStarts() {
    if (dataLines++ > 0) {
      payload((byte) '\n'); // data lines are joined by a newline
    }
  }

  private void payload(byte b) {
    if (probe.read(b) == ChoicesProbe.NOT_USAGE_ONLY) {
      notUsageOnly = true;
    }
  }

  /** The full check of a complete event's data: a JSON object with empty {@code choices} and a usage object. */
  private boolean usageOnly(SseEvent event) {
    try (JsonParser p = json.createParser(event.payloadArray(), event.payloadOffset(), event.payloadLength())) {
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
