package io.disaggusage.extproc.inject;

/**
 * Reads the data of an SSE event a byte at a time just far enough to tell that it is certainly not
 * a usage-only chunk: its data does not start with <code>{</code>, the root object's first
 * {@code choices} member is not an empty array, or the root object ends without one. It checks no grammar; the full check of a candidate
 * is a parse of the complete event. A member name with an escape makes it stop deciding (the event is
 * then held to its end and parsed).
 */
final class ChoicesProbe {
  /** Keep reading: the event may still be a usage-only chunk. */
  static final int UNDECIDED = 0;
  /** Certainly not a usage-only chunk. */
  static final int NOT_USAGE_ONLY = 1;

  private static final byte[] CHOICES = {'c', 'h', 'o', 'i', 'c', 'e', 's'};

  private static final int START = 0;
  private static final int ROOT = 1;
  /** After {@code "choices":}: the value's first byte decides. */
  private static final int CHOICES_VALUE = 2;
  /** After {@code "choices":[}: the next byte decides. */
  private static final int CHOICES_OPEN = 3;
  /** Nothing more to learn before the event ends. */
  private static final int DONE = 4;

  private int state;
  private int depth;
  private boolean inString;
  private boolean escaped;
  private boolean expectName;
  private boolean readingName;
  private int nameLength;
  private boolean nameIsChoices;
  private boolean lastNameChoices;

  void reset() {
    state = START;
    depth = 0;
    inString = false;
    escaped = false;
    expectName = false;
    readingName = false;
    lastNameChoices = false;
  }

  int read(byte b) {
    boolean space = b == ' ' || b == '\t' || b == '\n' || b == '\r';
    return switch (state) {
      case DONE -> UNDECIDED;
      case START -> expect(b, space, (byte) '{', ROOT);
      case CHOICES_VALUE -> expect(b, space, (byte) '[', CHOICES_OPEN);
      // An empty choices array: a candidate, judged when the event is complete.
      case CHOICES_OPEN -> expect(b, space, (byte) ']', DONE);
      default -> root(b);
    };
  }

  /** Past whitespace, the next byte must be {@code expected} (then {@code next}), or it is decided. */
  private int expect(byte b, boolean space, byte expected, int next) {
    if (space) {
      return UNDECIDED;
    }
    if (b != expected) {
      return decided();
    }
    state = next;
    if (next == ROOT) {
      depth = 1;
      expectName = true;
    }
    return UNDECIDED;
  }

  private int decided() {
    state = DONE;
    return NOT_USAGE_ONLY;
  }

  private int root(byte b) {
    if (inString) {
      if (escaped) {
        escaped = false;
      } else if (b == '\\') {
        escaped = true;
        if (readingName) {
          state = DONE; // an escaped member name: leave it to the full parse
        }
      } else if (b == '"') {
        inString = false;
        if (readingName) {
          readingName = false;
          lastNameChoices = nameIsChoices && nameLength == CHOICES.length;
        }
      } else if (readingName) {
        nameIsChoices &= nameLength < CHOICES.length && CHOICES[nameLength] == b;
        nameLength++;
      }
      return UNDECIDED;
    }
    switch (b) {
      case '"' -> {
        inString = true;
        readingName = depth == 1 && expectName;
        nameLength = 0;
        nameIsChoices = true;
      }
      case ':' -> {
        expectName = false;
        if (depth == 1 && lastNameChoices) {
          state = CHOICES_VALUE;
        }
      }
      case ',' -> expectName = depth == 1;
      case '{', '[' -> depth++;
      case '}', ']' -> {
        if (--depth == 0) {
          return decided(); // the object ended without a choices member
        }
      }
      default -> {}
    }
    return UNDECIDED;
  }
}
