package io.disaggusage.extproc.json;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Collection;

/**
 * An incremental structural scanner for one JSON document fed in chunks of any size: it tracks
 * nesting, strings and escapes, numbers and literals, checks the syntax as strictly as the service's
 * blocking Jackson parser does (same limits on nesting, number and name length, same UTF-8 and
 * escape rules), and reports where the document's usage objects start and end. It decodes no
 * values and allocates nothing per byte or chunk (only a copy of each string {@code model} value).
 *
 * <p>A usage slot is the value of the root object's {@code usage} member, or of the {@code usage}
 * member of a root member named as a usage container at construction ({@code response},
 * {@code message}: the same places {@code UsageDocument} looks).
 * {@link #scan} stops right after the byte that starts or ends a usage-slot value, or at a syntax
 * error, and says which through {@link #event()} and {@link #eventIndex()}. The scanner also keeps the
 * raw text of the last string {@code model} member at those places.
 *
 * <p>A caller that edits a document as it streams (the request rewrite of
 * {@code streaming.inject_include_usage}) also hears about the top levels' structure through a
 * {@link Structure}: member names at the root and in the containers, where values start, where
 * literals end and where containers close. Without one, none of that costs anything.
 */
public final class JsonUsageScanner {

  /** What stopped {@link #scan}. */
  public enum Event {
    /** The chunk was consumed with nothing to report. */
    NONE,
    /** The byte at {@link #eventIndex()} is the opening brace of a usage-slot object. */
    USAGE_OBJECT_START,
    /** The byte at {@link #eventIndex()} starts a usage-slot value that is not an object. */
    USAGE_OTHER_START,
    /** The byte at {@link #eventIndex()} is the closing brace of the usage-slot object. */
    USAGE_OBJECT_END,
    /** The byte at {@link #eventIndex()} makes the document malformed; the scanner is done. */
    ERROR
  }

  /**
   * The top levels of the document as they are read, each call made while the byte it names is
   * scanned. Depths count the containers open before the value (a root member's value is at depth 1);
   * indexes are into the array given to {@link #scan}.
   */
  public interface Structure {
    /**
     * A member name of the root (depth 1) or of a container (depth 2) ended, escapes decoded; null when
     * longer than {@link #MAX_REPORTED_NAME} or not plain ASCII.
     */
    void memberName(int depth, String name);

    /** A value at depth 1 or 2 starts with byte {@code first} at {@code index}. */
    void valueStart(int depth, int first, int index);

    /** A {@code true}/{@code false}/{@code null} literal at depth 1 or 2 ended before {@code end}. */
    void literalEnd(int depth, int first, int end);

    /** The bracket at {@code index} closed a container; {@code depth} is the depth after it (0: the root). */
    void containerEnd(int depth, int index);
  }

  /** Longest member name told to a {@link Structure}; longer ones are reported as null. */
  public static final int MAX_REPORTED_NAME = 32;

  /** Jackson's {@code StreamReadConstraints} as the service configures them (UsageDocument). */
  public static final int MAX_DEPTH = 1000;

  public static final int MAX_NUMBER_DIGITS = 1000;
  /** Jackson's default name limit, counted in UTF-8 bytes of the decoded name. */
  public static final int MAX_NAME_BYTES = 50_000;
  /** Longest {@code model} string kept (raw bytes between the quotes); longer ones are not reported. */
  public static final int MAX_MODEL_BYTES = 1024;

  // Between tokens.
  private static final int BOM1 = 0;
  private static final int BOM2 = 1;
  private static final int BEFORE_ROOT = 2;
  private static final int OBJECT_FIRST = 3; // after '{': a name or '}'
  private static final int OBJECT_NAME = 4; // after ',' in an object: a name
  private static final int COLON = 5;
  private static final int VALUE = 6; // after ':' or ',' in an array
  private static final int ARRAY_FIRST = 7; // after '[': a value or ']'
  private static final int AFTER_VALUE = 8;
  private static final int END = 9; // the root object closed: whitespace only
  // Inside tokens.
  private static final int STRING = 10;
  private static final int STRING_ESCAPE = 11;
  private static final int STRING_HEX = 12;
  private static final int STRING_UTF8 = 13;
  private static final int NAME_LOW_BACKSLASH = 14; // a name's high surrogate escape wants "\\u" + low
  private static final int NAME_LOW_U = 15;
  private static final int LITERAL = 16;
  private static final int NUM_MINUS = 17;
  private static final int NUM_ZERO = 18;
  private static final int NUM_INT = 19;
  private static final int NUM_DOT = 20;
  private static final int NUM_FRAC = 21;
  private static final int NUM_E = 22;
  private static final int NUM_E_SIGN = 23;
  private static final int NUM_EXP = 24;
  private static final int FAILED = 25;

  // What the current string is.
  private static final int KIND_VALUE = 0;
  private static final int KIND_NAME = 1;
  private static final int KIND_MODEL = 2;

  // What the next value is the value of.
  private static final int SLOT_NONE = 0;
  private static final int SLOT_USAGE = 1;
  private static final int SLOT_MODEL = 2;
  private static final int SLOT_CONTAINER = 3; // a usage container of the root

  private static final byte[] TRUE = {'t', 'r', 'u', 'e'};
  private static final byte[] FALSE = {'f', 'a', 'l', 's', 'e'};
  private static final byte[] NULL = {'n', 'u', 'l', 'l'};
  private static final byte[] USAGE = {'u', 's', 'a', 'g', 'e'};
  private static final byte[] MODEL = {'m', 'o', 'd', 'e', 'l'};

  /** Bytes that continue a string without anything to check: printable ASCII but quote, backslash. */
  private static final boolean[] PLAIN = new boolean[256];

  static {
    for (int c = 0x20; c < 0x80; c++) {
      PLAIN[c] = c != '"' && c != '\\';
    }
  }

  private int state = BEFORE_ROOT;
  private boolean atStart = true;
  private int depth;
  private final long[] objects = new long[MAX_DEPTH / 64 + 1]; // bit d set: the container at depth d is an object

  private int kind;
  private int utf8Left;
  private boolean surrogateCheck; // the next continuation byte must be below 0xA0 (no UTF-8 surrogates)
  private int hexLeft;
  private int hexValue;
  private boolean expectLow; // the hex digits being read must be a name's low surrogate
  private byte[] literal;
  private int literalPos;
  private int digits;

  private int nameBytes; // decoded UTF-8 length of the current name
  private final byte[][] containers; // names of the root's members that may hold usage and model
  private final Structure structure; // null when nobody listens
  private boolean classify; // the current name may be usage / model / a container
  private final byte[] nameHead; // the current name's start, as long as the longest name of interest
  private int nameHeadLength; // -1 once the name can be none of them
  private int pendingSlot = SLOT_NONE;

  private int usageDepth; // depth of the open usage-slot object, 0 when none is open
  private boolean containerOpen; // a usage container of the root is open (it is at depth 2)

  private byte[] modelText; // the string being captured, lazily allocated
  private int modelLength; // -1 when the string being captured is too long
  private byte[] model; // raw text of the last complete string model, or null

  private Event event = Event.NONE;
  private int eventIndex = -1;

  /**
   * A scanner for one document whose usage may also sit in the root members named {@code
   * usageContainers} (plain ASCII names).
   */
  public JsonUsageScanner(Collection<String> usageContainers) {
    this(usageContainers, null);
  }

  /**
   * A scanner that also tells {@code structure} about the root and the objects of the root members
   * named {@code containers} (plain ASCII names, at most {@link #MAX_REPORTED_NAME} bytes).
   */
  public JsonUsageScanner(Collection<String> containers, Structure structure) {
    this.containers = new byte[containers.size()][];
    int k = 0;
    for (String name : containers) {
      this.containers[k++] = name.getBytes(StandardCharsets.US_ASCII);
    }
    this.structure = structure;
    // Without a listener only names that may be a slot are kept: nothing longer is copied per name.
    int longest = Math.max(USAGE.length, MODEL.length);
    for (byte[] container : this.containers) {
      longest = Math.max(longest, container.length);
    }
    this.nameHead = new byte[structure == null ? longest : Math.max(longest, MAX_REPORTED_NAME)];
  }

  /** What stopped the last {@link #scan}. */
  public Event event() {
    return event;
  }

  /** Index, in the array given to the last {@link #scan}, of the byte behind {@link #event()}. */
  public int eventIndex() {
    return eventIndex;
  }

  /** True once the root object has closed and nothing but whitespace followed (so far). */
  public boolean complete() {
    return state == END;
  }

  /** True after a syntax error. */
  public boolean failed() {
    return state == FAILED;
  }

  /**
   * The raw bytes between the quotes of the last string-valued {@code model} member seen (root or a
   * usage container), escapes undecoded; null if none, or if the last one was
   * longer than {@link #MAX_MODEL_BYTES}.
   */
  public byte[] modelText() {
    return model;
  }

  /**
   * Scans {@code b[from, to)} until an event. Returns the index of the first byte not yet scanned:
   * {@code to} with {@link Event#NONE}, or just past the event byte; after {@link Event#ERROR} the
   * scanner stays failed and consumes nothing more.
   */
  public int scan(byte[] b, int from, int to) {
    event = Event.NONE;
    // A local: read once per call, not once per value (the field is reloaded after every call).
    Structure structure = this.structure;
    int i = from;
    while (i < to) {
      int c = b[i] & 0xFF;
      switch (state) {
        case STRING -> {
          int start = i;
          if (kind == KIND_VALUE) {
            while (i < to && PLAIN[b[i] & 0xFF]) {
              i++;
            }
          } else {
            while (i < to && PLAIN[b[i] & 0xFF]) {
              i++;
            }
            if (!plainRun(b, start, i)) {
              return fail(i);
            }
          }
          if (i == to) {
            return to;
          }
          c = b[i] & 0xFF;
          if (c == '"') {
            if (!endString()) {
              return fail(i);
            }
          } else if (c == '\\') {
            keepModel(c);
            state = STRING_ESCAPE;
          } else if (c < 0x20) {
            return fail(i);
          } else if (!utf8Lead(c)) {
            return fail(i);
          }
          i++;
        }
        case OBJECT_FIRST, OBJECT_NAME -> {
          if (isSpace(c)) {
            i++;
          } else if (c == '"') {
            startName();
            i++;
          } else if (c == '}' && state == OBJECT_FIRST) {
            if (close(c, i)) {
              return i + 1;
            }
            i++;
          } else {
            return fail(i);
          }
        }
        case COLON -> {
          if (isSpace(c)) {
            i++;
          } else if (c == ':') {
            state = VALUE;
            i++;
          } else {
            return fail(i);
          }
        }
        case VALUE, ARRAY_FIRST -> {
          if (isSpace(c)) {
            i++;
          } else if (c == ']' && state == ARRAY_FIRST) {
            if (close(c, i)) {
              return i + 1;
            }
            i++;
          } else {
            int slot = pendingSlot;
            pendingSlot = SLOT_NONE;
            if (structure != null && depth <= 2) {
              structure.valueStart(depth, c, i);
            }
            if (!startValue(c, slot)) {
              return fail(i);
            }
            i++;
            if (slot == SLOT_USAGE) {
              event = c == '{' ? Event.USAGE_OBJECT_START : Event.USAGE_OTHER_START;
              eventIndex = i - 1;
              return i;
            }
          }
        }
        case AFTER_VALUE -> {
          if (isSpace(c)) {
            i++;
          } else if (c == ',') {
            state = isObject(depth) ? OBJECT_NAME : VALUE;
            i++;
          } else if (c == '}' || c == ']') {
            if (close(c, i)) {
              return i + 1;
            }
            if (state == FAILED) {
              return fail(i);
            }
            i++;
          } else {
            return fail(i);
          }
        }
        case NUM_INT, NUM_FRAC, NUM_EXP -> {
          if (c >= '0' && c <= '9') {
            int start = i;
            while (i < to && b[i] >= '0' && b[i] <= '9') {
              i++;
            }
            digits += i - start;
            if (digits > MAX_NUMBER_DIGITS) {
              return fail(i - 1);
            }
          } else if (c == '.' && state == NUM_INT) {
            state = NUM_DOT;
            i++;
          } else if ((c == 'e' || c == 'E') && state != NUM_EXP) {
            state = NUM_E;
            i++;
          } else {
            state = AFTER_VALUE; // the number ended; this byte is looked at again
          }
        }
        case NUM_ZERO -> {
          if (c >= '0' && c <= '9') {
            return fail(i); // leading zeroes
          } else if (c == '.') {
            state = NUM_DOT;
            i++;
          } else if (c == 'e' || c == 'E') {
            state = NUM_E;
            i++;
          } else {
            state = AFTER_VALUE;
          }
        }
        case NUM_MINUS -> {
          if (c == '0') {
            state = NUM_ZERO;
          } else if (c > '0' && c <= '9') {
            state = NUM_INT;
          } else {
            return fail(i);
          }
          digits = 1;
          i++;
        }
        case NUM_DOT, NUM_E_SIGN -> {
          if (c < '0' || c > '9') {
            return fail(i);
          }
          state = state == NUM_DOT ? NUM_FRAC : NUM_EXP;
          if (++digits > MAX_NUMBER_DIGITS) {
            return fail(i);
          }
          i++;
        }
        case NUM_E -> {
          if (c == '+' || c == '-') {
            state = NUM_E_SIGN;
          } else if (c >= '0' && c <= '9') {
            state = NUM_EXP;
            if (++digits > MAX_NUMBER_DIGITS) {
              return fail(i);
            }
          } else {
            return fail(i);
          }
          i++;
        }
        case LITERAL -> {
          if (c != literal[literalPos]) {
            return fail(i);
          }
          if (++literalPos == literal.length) {
            state = AFTER_VALUE;
            if (structure != null && depth <= 2) {
              structure.literalEnd(depth, literal[0], i + 1);
            }
          }
          i++;
        }
        case STRING_ESCAPE -> {
          keepModel(c);
          if (c == 'u') {
            state = STRING_HEX;
            hexLeft = 4;
            hexValue = 0;
          } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r'
              || c == 't') {
            if (kind == KIND_NAME && !nameChar(unescape(c), 1)) {
              return fail(i);
            }
            state = STRING;
          } else {
            return fail(i);
          }
          i++;
        }
        case STRING_HEX -> {
          int h = hex(c);
          if (h < 0) {
            return fail(i);
          }
          keepModel(c);
          hexValue = (hexValue << 4) | h;
          if (--hexLeft == 0 && !endHex()) {
            return fail(i);
          }
          i++;
        }
        case STRING_UTF8 -> {
          if ((c & 0xC0) != 0x80 || (surrogateCheck && c >= 0xA0)) {
            return fail(i);
          }
          surrogateCheck = false;
          keepModel(c);
          if (kind == KIND_NAME && !nameChar(0xFF, 1)) {
            return fail(i);
          }
          if (--utf8Left == 0) {
            state = STRING;
          }
          i++;
        }
        case NAME_LOW_BACKSLASH -> {
          if (c != '\\') {
            return fail(i);
          }
          state = NAME_LOW_U;
          i++;
        }
        case NAME_LOW_U -> {
          if (c != 'u') {
            return fail(i);
          }
          state = STRING_HEX;
          hexLeft = 4;
          hexValue = 0;
          expectLow = true;
          i++;
        }
        case END -> {
          if (!isSpace(c)) {
            return fail(i);
          }
          i++;
        }
        case BEFORE_ROOT -> {
          if (atStart && c == 0xEF) {
            state = BOM1; // Jackson skips a UTF-8 byte order mark, and only at the very start
          } else if (c == '{') {
            push(true);
            state = OBJECT_FIRST;
          } else if (!isSpace(c)) {
            return fail(i);
          }
          atStart = false;
          i++;
        }
        case BOM1, BOM2 -> {
          if (c != (state == BOM1 ? 0xBB : 0xBF)) {
            return fail(i);
          }
          state = state == BOM1 ? BOM2 : BEFORE_ROOT;
          i++;
        }
        case FAILED -> {
          return to;
        }
        default -> throw new IllegalStateException("scanner state " + state);
      }
    }
    return to;
  }

  private int fail(int i) {
    state = FAILED;
    event = Event.ERROR;
    eventIndex = i;
    return i;
  }

  private static boolean isSpace(int c) {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
  }

  private static int hex(int c) {
    if (c >= '0' && c <= '9') {
      return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
      return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
      return c - 'A' + 10;
    }
    return -1;
  }

  private static int unescape(int c) {
    return switch (c) {
      case 'b' -> '\b';
      case 'f' -> '\f';
      case 'n' -> '\n';
      case 'r' -> '\r';
      case 't' -> '\t';
      default -> c;
    };
  }

  private boolean isObject(int d) {
    return (objects[d >> 6] & (1L << (d & 63))) != 0;
  }

  private boolean push(boolean object) {
    if (depth == MAX_DEPTH) {
      return false;
    }
    depth++;
    if (object) {
      objects[depth >> 6] |= 1L << (depth & 63);
    } else {
      objects[depth >> 6] &= ~(1L << (depth & 63));
    }
    return true;
  }

  /**
   * Closes the innermost container with {@code c}; true when that ends the usage-slot object (the
   * event is then set). A bracket that does not match leaves the scanner failed.
   */
  private boolean close(int c, int i) {
    if (isObject(depth) != (c == '}')) {
      state = FAILED;
      return false;
    }
    boolean usageEnds = depth == usageDepth;
    if (usageEnds) {
      usageDepth = 0;
    }
    if (depth == 2) {
      containerOpen = false;
    }
    depth--;
    state = depth == 0 ? END : AFTER_VALUE;
    if (structure != null && depth <= 1) {
      structure.containerEnd(depth, i);
    }
    if (usageEnds) {
      event = Event.USAGE_OBJECT_END;
      eventIndex = i;
    }
    return usageEnds;
  }

  /** Starts the value whose first byte is {@code c}; false if no value starts so. */
  private boolean startValue(int c, int slot) {
    switch (c) {
      case '{' -> {
        if (!push(true)) {
          return false;
        }
        if (slot == SLOT_USAGE) {
          usageDepth = depth;
        } else if (slot == SLOT_CONTAINER) {
          containerOpen = true;
        }
        state = OBJECT_FIRST;
      }
      case '[' -> {
        if (!push(false)) {
          return false;
        }
        state = ARRAY_FIRST;
      }
      case '"' -> {
        kind = slot == SLOT_MODEL ? KIND_MODEL : KIND_VALUE;
        if (kind == KIND_MODEL) {
          if (modelText == null) {
            modelText = new byte[64];
          }
          modelLength = 0;
        }
        state = STRING;
      }
      case '-' -> state = NUM_MINUS;
      case '0' -> {
        digits = 1;
        state = NUM_ZERO;
      }
      case 't', 'f', 'n' -> {
        literal = c == 't' ? TRUE : c == 'f' ? FALSE : NULL;
        literalPos = 1;
        state = LITERAL;
      }
      default -> {
        if (c < '1' || c > '9') {
          return false;
        }
        digits = 1;
        state = NUM_INT;
      }
    }
    return true;
  }

  private void startName() {
    kind = KIND_NAME;
    nameBytes = 0;
    classify = depth == 1 || (depth == 2 && containerOpen);
    nameHeadLength = 0;
    state = STRING;
  }

  /** Plain ASCII {@code b[start, end)} inside a name or a model string. */
  private boolean plainRun(byte[] b, int start, int end) {
    int n = end - start;
    if (n == 0) {
      return true;
    }
    if (kind == KIND_MODEL) {
      keepModel(b, start, n);
      return true;
    }
    nameBytes += n;
    if (nameBytes > MAX_NAME_BYTES) {
      return false;
    }
    if (classify && nameHeadLength >= 0) {
      if (nameHeadLength + n > nameHead.length) {
        nameHeadLength = -1;
      } else {
        System.arraycopy(b, start, nameHead, nameHeadLength, n);
        nameHeadLength += n;
      }
    }
    return true;
  }

  /** One decoded unit of a name worth {@code utf8Bytes} of its length; 0xFF stands for non-ASCII. */
  private boolean nameChar(int c, int utf8Bytes) {
    nameBytes += utf8Bytes;
    if (classify && nameHeadLength >= 0) {
      if (c > 0x7F || nameHeadLength == nameHead.length) {
        nameHeadLength = -1;
      } else {
        nameHead[nameHeadLength++] = (byte) c;
      }
    }
    return nameBytes <= MAX_NAME_BYTES;
  }

  /** A byte of 0x80 and above inside a string: a UTF-8 lead byte as Jackson accepts them. */
  private boolean utf8Lead(int c) {
    if (c >= 0xC0 && c <= 0xDF) {
      utf8Left = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      utf8Left = 2;
    } else if (c >= 0xF0 && c <= 0xF7) {
      utf8Left = 3;
    } else {
      return false;
    }
    // Names and decoded strings (model) reject UTF-8-encoded surrogates; skipped strings do not.
    surrogateCheck = c == 0xED && kind != KIND_VALUE;
    keepModel(c);
    state = STRING_UTF8;
    return kind != KIND_NAME || nameChar(0xFF, 1);
  }

  /** The four hex digits of a backslash-u escape were read. */
  private boolean endHex() {
    state = STRING;
    if (kind != KIND_NAME) {
      return true;
    }
    int v = hexValue;
    if (expectLow) {
      expectLow = false;
      return v >= 0xDC00 && v <= 0xDFFF && nameChar(0xFF, 4);
    }
    if (v >= 0xD800 && v <= 0xDBFF) {
      state = NAME_LOW_BACKSLASH;
      return true;
    }
    if (v >= 0xDC00 && v <= 0xDFFF) {
      return false;
    }
    return nameChar(v, v < 0x80 ? 1 : v < 0x800 ? 2 : 3);
  }

  private boolean endString() {
    switch (kind) {
      case KIND_NAME -> {
        pendingSlot = classify ? slotOf() : SLOT_NONE;
        if (classify && structure != null) {
          structure.memberName(
              depth, nameHeadLength < 0 ? null : new String(nameHead, 0, nameHeadLength, StandardCharsets.US_ASCII));
        }
        state = COLON;
      }
      case KIND_MODEL -> {
        model = modelLength < 0 ? null : Arrays.copyOf(modelText, modelLength);
        state = AFTER_VALUE;
      }
      default -> state = AFTER_VALUE;
    }
    return true;
  }

  private int slotOf() {
    if (nameHeadLength == USAGE.length && Arrays.equals(nameHead, 0, USAGE.length, USAGE, 0, USAGE.length)) {
      return SLOT_USAGE;
    }
    if (nameHeadLength == MODEL.length && Arrays.equals(nameHead, 0, MODEL.length, MODEL, 0, MODEL.length)) {
      return SLOT_MODEL;
    }
    if (depth == 1) {
      for (byte[] container : containers) {
        if (nameHeadLength == container.length
            && Arrays.equals(nameHead, 0, container.length, container, 0, container.length)) {
          return SLOT_CONTAINER;
        }
      }
    }
    return SLOT_NONE;
  }

  private void keepModel(int c) {
    if (kind == KIND_MODEL && modelLength >= 0) {
      if (modelLength == MAX_MODEL_BYTES) {
        modelLength = -1;
        return;
      }
      if (modelLength == modelText.length) {
        modelText = Arrays.copyOf(modelText, Math.min(MAX_MODEL_BYTES, modelText.length * 2));
      }
      modelText[modelLength++] = (byte) c;
    }
  }

  private void keepModel(byte[] b, int start, int n) {
    if (modelLength < 0) {
      return;
    }
    if (modelLength + n > MAX_MODEL_BYTES) {
      modelLength = -1;
      return;
    }
    if (modelLength + n > modelText.length) {
      modelText = Arrays.copyOf(modelText, Math.min(MAX_MODEL_BYTES, Math.max(modelLength + n, modelText.length * 2)));
    }
    System.arraycopy(b, start, modelText, modelLength, n);
    modelLength += n;
  }
}
