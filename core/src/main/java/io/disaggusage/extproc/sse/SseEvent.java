package io.disaggusage.extproc.sse;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.Set;

/**
 * One complete SSE event as framed by {@link SseFramer}: its exact raw bytes (every line with its
 * original terminator, plus the terminating blank line) and parsed views of the fields a rewriter
 * needs.
 *
 * <p>Field parsing follows the WHATWG "event stream interpretation" rules: a line starting with
 * {@code :} is a comment; otherwise the field name runs up to the first {@code :} (or the whole line
 * when there is none) and the value is the rest after that colon with one leading space removed. A
 * byte-order mark at the very start of the stream belongs to the first event's raw bytes but is not
 * part of its first field name.
 *
 * <p>The <em>data payload</em> is the values of all {@code data} lines joined with {@code \n} (a
 * {@code data} line without a colon contributes an empty value). When the event has a single data
 * line the payload is a view into the raw bytes (no copy); otherwise it is a joined copy, and
 * {@link #rawOffset(int)} maps payload indices back into the raw bytes.
 */
public final class SseEvent implements SseItem {

  private static final byte[] DONE = "[DONE]".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] USAGE = "\"usage\"".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] EMPTY = new byte[0];
  private static final Set<String> FINAL_EVENT_TYPES =
      Set.of("message_stop", "response.completed", "response.incomplete", "response.failed");

  private final byte[] raw;
  private final boolean terminated;
  private final String eventType;
  private final int dataLineCount;
  private final boolean onlyData;
  private final byte[] payload;
  private final int payloadOffset;
  private final int payloadLength;
  // Only for two or more data lines: per data line, its start in the payload, its value's start in
  // raw, and its value length.
  private final int[] segPayloadStart;
  private final int[] segRawStart;
  private final int[] segLength;

  /**
   * Parses an event.
   *
   * @param raw the event's raw bytes; owned by the event from now on
   * @param lines {@code 2 * lineCount} ints: for each non-blank line, the raw index where its content
   *     starts (after a stream-initial byte-order mark) and where its content ends (before the line
   *     terminator, or the end of the bytes for an unterminated last line)
   * @param lineCount number of lines described in {@code lines}
   * @param terminated whether the event ended with a blank line
   */
  SseEvent(byte[] raw, int[] lines, int lineCount, boolean terminated) {
    this.raw = raw;
    this.terminated = terminated;
    String type = null;
    int dataLines = 0;
    int firstValueStart = 0;
    int firstValueEnd = 0;
    int totalValueBytes = 0;
    for (int l = 0; l < lineCount; l++) {
      int cs = lines[2 * l];
      int ce = lines[2 * l + 1];
      int field = fieldOf(raw, cs, ce);
      if (field == FIELD_DATA) {
        int vs = valueStart(raw, cs + 4, ce);
        if (dataLines == 0) {
          firstValueStart = vs;
          firstValueEnd = ce;
        }
        dataLines++;
        totalValueBytes += ce - vs;
      } else if (field == FIELD_EVENT) {
        int vs = valueStart(raw, cs + 5, ce);
        type = new String(raw, vs, ce - vs, StandardCharsets.UTF_8);
      }
    }
    this.eventType = type;
    this.dataLineCount = dataLines;
    this.onlyData = dataLines == lineCount;
    if (dataLines == 0) {
      payload = EMPTY;
      payloadOffset = 0;
      payloadLength = 0;
      segPayloadStart = null;
      segRawStart = null;
      segLength = null;
    } else if (dataLines == 1) {
      payload = raw;
      payloadOffset = firstValueStart;
      payloadLength = firstValueEnd - firstValueStart;
      segPayloadStart = null;
      segRawStart = null;
      segLength = null;
    } else {
      payloadLength = totalValueBytes + dataLines - 1;
      payload = new byte[payloadLength];
      payloadOffset = 0;
      segPayloadStart = new int[dataLines];
      segRawStart = new int[dataLines];
      segLength = new int[dataLines];
      int k = 0;
      int pos = 0;
      for (int l = 0; l < lineCount; l++) {
        int cs = lines[2 * l];
        int ce = lines[2 * l + 1];
        if (fieldOf(raw, cs, ce) != FIELD_DATA) {
          continue;
        }
        int vs = valueStart(raw, cs + 4, ce);
        if (k > 0) {
          payload[pos++] = '\n';
        }
        segPayloadStart[k] = pos;
        segRawStart[k] = vs;
        segLength[k] = ce - vs;
        System.arraycopy(raw, vs, payload, pos, ce - vs);
        pos += ce - vs;
        k++;
      }
    }
  }

  private static final int FIELD_OTHER = 0;
  private static final int FIELD_DATA = 1;
  private static final int FIELD_EVENT = 2;

  /** Classifies the line content {@code raw[cs, ce)} by field name. */
  private static int fieldOf(byte[] raw, int cs, int ce) {
    int n = ce - cs;
    if (n >= 4 && raw[cs] == 'd' && raw[cs + 1] == 'a' && raw[cs + 2] == 't' && raw[cs + 3] == 'a'
        && (n == 4 || raw[cs + 4] == ':')) {
      return FIELD_DATA;
    }
    if (n >= 5 && raw[cs] == 'e' && raw[cs + 1] == 'v' && raw[cs + 2] == 'e' && raw[cs + 3] == 'n'
        && raw[cs + 4] == 't' && (n == 5 || raw[cs + 5] == ':')) {
      return FIELD_EVENT;
    }
    return FIELD_OTHER;
  }

  /** Value start for a field whose name ends at {@code nameEnd} (at the colon or the line end). */
  private static int valueStart(byte[] raw, int nameEnd, int ce) {
    if (nameEnd >= ce) {
      return ce; // no colon: empty value
    }
    int vs = nameEnd + 1; // skip ':'
    if (vs < ce && raw[vs] == ' ') {
      vs++;
    }
    return vs;
  }

  @Override
  public byte[] rawArray() {
    return raw;
  }

  /**
   * Whether the event ended with a blank line. False only for the last event of a stream that ended
   * without one (delivered by {@link SseFramer#finish()}).
   */
  public boolean terminated() {
    return terminated;
  }

  /**
   * The value of the last {@code event} field, or null when the event has none. An {@code event}
   * line without a colon or with an empty value yields the empty string.
   */
  public String eventType() {
    return eventType;
  }

  /** Number of {@code data} lines. */
  public int dataLineCount() {
    return dataLineCount;
  }

  /** Whether every line of the event is a {@code data} line (no other field, no comment). */
  public boolean onlyDataLines() {
    return onlyData;
  }

  /** Whether the event has at least one {@code data} line (possibly with an empty value). */
  public boolean hasData() {
    return dataLineCount > 0;
  }

  /**
   * The array holding the data payload at {@link #payloadOffset()}, {@link #payloadLength()} bytes.
   * This is the raw array itself for a single data line; callers must not modify it.
   */
  public byte[] payloadArray() {
    return payload;
  }

  public int payloadOffset() {
    return payloadOffset;
  }

  public int payloadLength() {
    return payloadLength;
  }

  /** The payload byte at {@code payloadIndex}. */
  public byte payloadByteAt(int payloadIndex) {
    Objects.checkIndex(payloadIndex, payloadLength);
    return payload[payloadOffset + payloadIndex];
  }

  /** A copy of the data payload. */
  public byte[] payloadBytes() {
    return Arrays.copyOfRange(payload, payloadOffset, payloadOffset + payloadLength);
  }

  /** The data payload decoded as UTF-8. */
  public String payloadString() {
    return new String(payload, payloadOffset, payloadLength, StandardCharsets.UTF_8);
  }

  /** Whether the data payload is exactly {@code [DONE]}. */
  public boolean isDone() {
    return payloadLength == DONE.length
        && Arrays.equals(payload, payloadOffset, payloadOffset + payloadLength, DONE, 0, DONE.length);
  }

  /**
   * Whether the event is its stream's last by the rules of its API, so that only the end of the body
   * can follow: {@code data: [DONE]} (chat and completions), {@code event: message_stop} (Anthropic
   * Messages), or {@code event: response.completed}, {@code response.incomplete} or {@code
   * response.failed} (Responses API).
   */
  public boolean endsStream() {
    return isDone() || (eventType != null && FINAL_EVENT_TYPES.contains(eventType));
  }

  /**
   * Cheap pre-check before JSON parsing: whether the payload contains the bytes {@code "usage"}
   * (with the quotes). False guarantees the payload has no {@code usage} key written without escapes.
   */
  public boolean mayContainUsage() {
    int last = payloadOffset + payloadLength - USAGE.length;
    for (int i = payloadOffset; i <= last; i++) {
      if (payload[i] == '"' && payload[i + 1] == 'u' && payload[i + 2] == 's' && payload[i + 3] == 'a'
          && payload[i + 4] == 'g' && payload[i + 5] == 'e' && payload[i + 6] == '"') {
        return true;
      }
    }
    return false;
  }

  /**
   * Maps a payload index to the raw index of the same byte. {@code payloadIndex} may be
   * {@link #payloadLength()}, and for a multi-line payload it may be the index of a joining
   * {@code \n}: both map to the raw index just past the end of the preceding data value (where that
   * line's terminator starts), so an insertion there lands at the end of that line.
   *
   * @throws IllegalStateException when the event has no data line
   * @throws IndexOutOfBoundsException when {@code payloadIndex} is outside {@code [0, payloadLength]}
   */
  public int rawOffset(int payloadIndex) {
    if (dataLineCount == 0) {
      throw new IllegalStateException("event has no data line");
    }
    Objects.checkFromToIndex(payloadIndex, payloadIndex, payloadLength);
    if (segPayloadStart == null) {
      return payloadOffset + payloadIndex;
    }
    int k = segmentOf(payloadIndex);
    return segRawStart[k] + (payloadIndex - segPayloadStart[k]);
  }

  /** The last data segment whose payload start is at or before {@code payloadIndex}. */
  private int segmentOf(int payloadIndex) {
    int k = Arrays.binarySearch(segPayloadStart, payloadIndex);
    // Starts are strictly increasing (each later segment starts past a joining '\n').
    return k >= 0 ? k : -k - 2;
  }

  /** A replacement of payload bytes {@code [payloadStart, payloadEnd)}; see {@link #patchedRaw(List)}. */
  public record Patch(int payloadStart, int payloadEnd, byte[] replacement) {
    public Patch {
      Objects.requireNonNull(replacement, "replacement");
      if (payloadStart < 0 || payloadEnd < payloadStart) {
        throw new IllegalArgumentException("bad range [" + payloadStart + ", " + payloadEnd + ")");
      }
    }
  }

  /** {@link #patchedRaw(List)} with one patch. */
  public byte[] patchedRaw(int payloadStart, int payloadEnd, byte[] replacement) {
    return patchedRaw(List.of(new Patch(payloadStart, payloadEnd, replacement)));
  }

  /**
   * Returns a new raw event in which each patch's payload range is replaced by its replacement bytes;
   * every other raw byte (field names, line terminators, other lines) is kept. The event itself is not
   * modified.
   *
   * @param patches sorted by position, non-overlapping; each range lies within one data line (it does
   *     not contain a joining {@code \n}), and no replacement contains CR or LF
   * @throws IllegalArgumentException when a patch violates these rules
   * @throws IllegalStateException when the event has no data line
   */
  public byte[] patchedRaw(List<Patch> patches) {
    if (dataLineCount == 0) {
      throw new IllegalStateException("event has no data line");
    }
    int newLength = raw.length;
    int prevEnd = 0;
    for (Patch p : patches) {
      if (p.payloadStart() < prevEnd) {
        throw new IllegalArgumentException("patches overlap or are not sorted");
      }
      if (p.payloadEnd() > payloadLength) {
        throw new IllegalArgumentException("patch ends past the payload");
      }
      if (segPayloadStart != null) {
        int k = segmentOf(p.payloadStart());
        if (p.payloadEnd() > segPayloadStart[k] + segLength[k]) {
          throw new IllegalArgumentException("patch spans a line break");
        }
      }
      for (byte b : p.replacement()) {
        if (b == '\n' || b == '\r') {
          throw new IllegalArgumentException("replacement contains a line terminator");
        }
      }
      newLength += p.replacement().length - (p.payloadEnd() - p.payloadStart());
      prevEnd = p.payloadEnd();
    }
    byte[] out = new byte[newLength];
    int src = 0;
    int dst = 0;
    for (Patch p : patches) {
      int from = rawOffset(p.payloadStart());
      System.arraycopy(raw, src, out, dst, from - src);
      dst += from - src;
      byte[] r = p.replacement();
      System.arraycopy(r, 0, out, dst, r.length);
      dst += r.length;
      src = from + (p.payloadEnd() - p.payloadStart());
    }
    System.arraycopy(raw, src, out, dst, raw.length - src);
    return out;
  }

  @Override
  public String toString() {
    return "SseEvent{" + (eventType == null ? "" : "event=" + eventType + ", ")
        + "dataLines=" + dataLineCount + (terminated ? "" : ", unterminated") + ", "
        + escape(raw, 0, raw.length, 120) + "}";
  }

  /** Printable form of bytes with CR/LF and non-ASCII escaped, cut after {@code limit} bytes. */
  static String escape(byte[] b, int off, int len, int limit) {
    StringBuilder sb = new StringBuilder(Math.min(len, limit) + 8).append('"');
    int n = Math.min(len, limit);
    for (int i = off; i < off + n; i++) {
      int c = b[i] & 0xff;
      if (c == '\n') {
        sb.append("\\n");
      } else if (c == '\r') {
        sb.append("\\r");
      } else if (c == '\\') {
        sb.append("\\\\");
      } else if (c < 0x20 || c >= 0x7f) {
        sb.append(String.format("\\x%02x", c));
      } else {
        sb.append((char) c);
      }
    }
    sb.append('"');
    if (len > limit) {
      sb.append("...(").append(len).append(" bytes)");
    }
    return sb.toString();
  }
}
