package io.disaggusage.extproc.logtext;

/**
 * Bounds text that comes from clients (correlation keys, model names) before it reaches a log line:
 * control, format and whitespace characters become {@code ?} and the text is cut to a maximum length,
 * so a header cannot forge log lines, break {@code key=value} parsing or bloat them.
 */
public final class LogText {
  /** Longest client-supplied value written to a log line, in UTF-16 units. */
  public static final int MAX = 64;

  private LogText() {}

  /**
   * {@code text} with the user-info part of anything that looks like a URI replaced by {@code ***}
   * ({@code redis://:secret@host} → {@code redis://***@host}): configured URLs may carry credentials.
   */
  public static String withoutCredentials(String text) {
    return text.replaceAll("(?i)([a-z][a-z0-9+.-]*://)[^@/\\s]*@", "$1***@");
  }

  /** {@code text} bounded to {@link #MAX} characters; {@code "-"} for null. */
  public static String bounded(String text) {
    return bounded(text, MAX);
  }

  /**
   * {@code text} with unsafe characters replaced by {@code ?} and, when longer than {@code max}, cut to
   * {@code max} characters ending in {@code ...}; {@code "-"} for null. {@code max} is at least 4.
   */
  public static String bounded(String text, int max) {
    if (text == null) {
      return "-";
    }
    if (max < 4) {
      throw new IllegalArgumentException("max must be at least 4, got " + max);
    }
    boolean cut = text.length() > max;
    int end = cut ? max - 3 : text.length();
    if (cut && Character.isHighSurrogate(text.charAt(end - 1))) {
      end--; // never split a surrogate pair
    }
    StringBuilder out = new StringBuilder(end + 3);
    for (int i = 0; i < end; i++) {
      char c = text.charAt(i);
      out.append(safe(c) ? c : '?');
    }
    if (cut) {
      out.append("...");
    }
    return out.toString();
  }

  private static boolean safe(char c) {
    return !Character.isISOControl(c)
        && !Character.isWhitespace(c)
        && !Character.isSpaceChar(c)
        && Character.getType(c) != Character.FORMAT;
  }
}
