package io.disaggusage.extproc.inject;

/**
 * A byte-at-a-time JSON grammar check that reports where values start and end, for rewriting a
 * request body as it streams. It keeps no values: the container stack (one bit per level), the state
 * inside the current token, and the decoded text of member names of the top two levels (at most
 * {@link #MAX_NAME} characters; longer or non-ASCII names are reported as null, which no name the
 * caller looks for is). Deeper member names are not reported.
 *
 * <p>The grammar is RFC 8259 without UTF-8 validation (the caller only ever adds ASCII, so a body
 * with broken UTF-8 stays broken and the worker rejects it either way) and, like Python's {@code json},
 * without pairing surrogate escapes (backslash-u); at most {@link #MAX_DEPTH} levels, and nothing but
 * whitespace after the root value. Positions are absolute byte offsets in
 * the body.
 */
final class RequestJsonLexer {
  static final int MAX_DEPTH = 1000;
  static final int MAX_NAME = 32;

  /** What the caller hears about; depths count the containers open before the value. */
  interface Listener {
    /** A member name of an object at depth 1 or 2 ended; null when too long or not plain ASCII. */
    void memberName(int depth, String name);

    /** A value starts at {@code pos} with byte {@code first}. */
    void valueStart(int depth, byte first, long pos);

    /** A {@code true}/{@code false}/{@code null} literal started at depth {@code depth} ended before {@code end}. */
    void literalEnd(int depth, byte first, long end);

    /** The container closed by the bracket at {@code pos}; {@code depth} is the depth after it (0: the root). */
    void containerEnd(int depth, long pos);
  }

  private static final int VALUE = 0;
  private static final int ARRAY_FIRST = 1;
  private static final int OBJECT_FIRST = 2;
  private static final int KEY = 3;
  private static final int COLON = 4;
  private static final int AFTER = 5;
  private static final int STRING = 6;
  private static final int NUMBER = 7;
  private static final int LITERAL = 8;
  private static final int DONE = 9;
  private static final int ERROR = 10;

  // Number parts; the ones a number may end in are marked.
  private static final int N_MINUS = 0;
  private static final int N_ZERO = 1; // may end
  private static final int N_INT = 2; // may end
  private static final int N_DOT = 3;
  private static final int N_FRAC = 4; // may end
  private static final int N_E = 5;
  private static final int N_E_SIGN = 6;
  private static final int N_EXP = 7; // may end

  private static final byte[] TRUE = {'t', 'r', 'u', 'e'};
  private static final byte[] FALSE = {'f', 'a', 'l', 's', 'e'};
  private static final byte[] NULL = {'n', 'u', 'l', 'l'};

  private final Listener listener;
  private final long[] objects = new long[(MAX_DEPTH + 63) / 64];
  private int depth;
  private int state = VALUE;

  private boolean stringIsName;
  /** 0: none; 1: after a backslash; 2..5: hex digits of a backslash-u escape still to read. */
  private int escape;
  private int hex;
  private final StringBuilder name = new StringBuilder(MAX_NAME);
  private boolean nameUsable;

  private int number;
  private byte[] literal;
  private int literalAt;
  private int literalDepth;

  RequestJsonLexer(Listener listener) {
    this.listener = listener;
  }

  /** Whether the body so far is a prefix of valid JSON. */
  boolean ok() {
    return state != ERROR;
  }

  /** Whether the root value has ended. */
  boolean done() {
    return state == DONE;
  }

  /** Reads the byte at {@code pos}; false once the body cannot be valid JSON. */
  boolean feed(byte b, long pos) {
    switch (state) {
      case STRING -> string(b);
      case NUMBER -> {
        if (!number(b)) {
          valueEnded();
          return structure(b, pos);
        }
      }
      case LITERAL -> literal(b, pos);
      default -> {
        return structure(b, pos);
      }
    }
    return state != ERROR;
  }

  private boolean structure(byte b, long pos) {
    if (b == ' ' || b == '\t' || b == '\n' || b == '\r') {
      return state != ERROR;
    }
    switch (state) {
      case VALUE, ARRAY_FIRST -> {
        if (b == ']' && state == ARRAY_FIRST) {
          close(pos);
        } else {
          value(b, pos);
        }
      }
      case OBJECT_FIRST, KEY -> {
        if (b == '"') {
          startString(true);
        } else if (b == '}' && state == OBJECT_FIRST) {
          close(pos);
        } else {
          state = ERROR;
        }
      }
      case COLON -> state = b == ':' ? VALUE : ERROR;
      case AFTER -> {
        boolean object = isObject(depth - 1);
        if (b == ',') {
          state = object ? KEY : VALUE;
        } else if (b == (object ? '}' : ']')) {
          close(pos);
        } else {
          state = ERROR;
        }
      }
      default -> state = ERROR; // DONE: only whitespace may follow the root value
    }
    return state != ERROR;
  }

  private void value(byte b, long pos) {
    switch (b) {
      case '{', '[' -> {
        listener.valueStart(depth, b, pos);
        if (depth == MAX_DEPTH) {
          state = ERROR;
          return;
        }
        setObject(depth, b == '{');
        depth++;
        state = b == '{' ? OBJECT_FIRST : ARRAY_FIRST;
      }
      case '"' -> {
        listener.valueStart(depth, b, pos);
        startString(false);
      }
      case 't', 'f', 'n' -> {
        listener.valueStart(depth, b, pos);
        literal = b == 't' ? TRUE : b == 'f' ? FALSE : NULL;
        literalAt = 1;
        literalDepth = depth;
        state = LITERAL;
      }
      default -> {
        if (b == '-' || (b >= '0' && b <= '9')) {
          listener.valueStart(depth, b, pos);
          number = b == '-' ? N_MINUS : b == '0' ? N_ZERO : N_INT;
          state = NUMBER;
        } else {
          state = ERROR;
        }
      }
    }
  }

  private void close(long pos) {
    depth--;
    listener.containerEnd(depth, pos);
    valueEnded();
  }

  private void valueEnded() {
    state = depth == 0 ? DONE : AFTER;
  }

  private void startString(boolean isName) {
    stringIsName = isName;
    escape = 0;
    if (isName) {
      name.setLength(0);
      nameUsable = depth <= 2;
    }
    state = STRING;
  }

  private void string(byte b) {
    if (escape == 1) {
      switch (b) {
        case '"', '\\', '/' -> appendName((char) b);
        case 'b' -> appendName('\b');
        case 'f' -> appendName('\f');
        case 'n' -> appendName('\n');
        case 'r' -> appendName('\r');
        case 't' -> appendName('\t');
        case 'u' -> {
          escape = 5;
          hex = 0;
          return;
        }
        default -> {
          state = ERROR;
          return;
        }
      }
      escape = 0;
      return;
    }
    if (escape > 1) {
      int digit = Character.digit(b, 16);
      if (digit < 0) {
        state = ERROR;
        return;
      }
      hex = hex * 16 + digit;
      if (--escape == 1) {
        escape = 0;
        appendName((char) hex);
      }
      return;
    }
    if (b == '"') {
      if (stringIsName) {
        state = COLON;
        if (depth <= 2) {
          listener.memberName(depth, nameUsable ? name.toString() : null);
        }
      } else {
        valueEnded();
      }
    } else if (b == '\\') {
      escape = 1;
    } else if (b >= 0 && b < 0x20) {
      state = ERROR; // a raw control character
    } else {
      appendName(b < 0 ? '\uFFFD' : (char) b);
    }
  }

  private void appendName(char c) {
    if (!stringIsName || !nameUsable) {
      return;
    }
    if (name.length() == MAX_NAME || c >= 0x80) {
      nameUsable = false; // longer than any name the caller looks for, or not ASCII
      return;
    }
    name.append(c);
  }

  /** Advances the number; false when {@code b} ends it (to be read as structure), ERROR when invalid. */
  private boolean number(byte b) {
    boolean digit = b >= '0' && b <= '9';
    switch (number) {
      case N_MINUS -> number = b == '0' ? N_ZERO : digit ? N_INT : -1;
      case N_ZERO, N_INT -> {
        if (digit && number == N_INT) {
          return true;
        }
        if (b == '.') {
          number = N_DOT;
        } else if (b == 'e' || b == 'E') {
          number = N_E;
        } else {
          return endNumber(b);
        }
      }
      case N_DOT -> number = digit ? N_FRAC : -1;
      case N_FRAC -> {
        if (b == 'e' || b == 'E') {
          number = N_E;
        } else if (!digit) {
          return endNumber(b);
        }
      }
      case N_E -> number = digit ? N_EXP : (b == '+' || b == '-') ? N_E_SIGN : -1;
      case N_E_SIGN -> number = digit ? N_EXP : -1;
      default -> { // N_EXP
        if (!digit) {
          return endNumber(b);
        }
      }
    }
    if (number < 0) {
      state = ERROR;
    }
    return true;
  }

  private boolean endNumber(byte b) {
    if (b >= '0' && b <= '9') {
      state = ERROR; // a digit after a leading zero
      return true;
    }
    return false;
  }

  private void literal(byte b, long pos) {
    if (b != literal[literalAt]) {
      state = ERROR;
      return;
    }
    if (++literalAt == literal.length) {
      valueEnded();
      listener.literalEnd(literalDepth, literal[0], pos + 1);
    }
  }

  /** Ends the input: true when it was exactly one complete JSON value. */
  boolean end() {
    if (state == NUMBER && (number == N_ZERO || number == N_INT || number == N_FRAC || number == N_EXP)) {
      valueEnded(); // a bare number as the whole body: complete, though not an object
    }
    return state == DONE;
  }

  private boolean isObject(int level) {
    return (objects[level >>> 6] & (1L << level)) != 0;
  }

  private void setObject(int level, boolean object) {
    if (object) {
      objects[level >>> 6] |= 1L << level;
    } else {
      objects[level >>> 6] &= ~(1L << level);
    }
  }
}
