package io.disaggusage.extproc.testkit;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The bytes of a body or stream that the usage rule keeps as they were (behaviour.md §2): the text with
 * the members of every {@code usage} object removed, so two bodies that differ only inside their usage
 * compare equal.
 */
public final class OutsideUsage {
  private static final Pattern USAGE = Pattern.compile("\"usage\"\\s*:\\s*\\{");

  private OutsideUsage() {}

  /** {@code text} with every {@code usage} object emptied. */
  public static String of(String text) {
    StringBuilder out = new StringBuilder();
    Matcher m = USAGE.matcher(text);
    int at = 0;
    while (m.find(at)) {
      int depth = 1;
      int end = m.end();
      while (depth > 0) {
        char ch = text.charAt(end++);
        depth += ch == '{' ? 1 : ch == '}' ? -1 : 0;
      }
      out.append(text, at, m.end()).append('}');
      at = end;
    }
    return out.append(text.substring(at)).toString();
  }
}
