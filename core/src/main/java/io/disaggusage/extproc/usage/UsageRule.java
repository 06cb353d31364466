package io.disaggusage.extproc.usage;

import com.fasterxml.jackson.core.io.JsonStringEncoder;
import io.disaggusage.extproc.json.ByteEdits;
import io.disaggusage.extproc.json.JsonObjectView.Member;
import io.disaggusage.extproc.json.JsonObjectView;
import java.math.BigInteger;

/**
 * What the rewrite rule of behaviour.md §2 yields for one usage object, whichever {@link ApiShape}
 * applied it, and the small helpers every shape's rule writes with.
 */
public final class UsageRule {

  /** The result of applying the rule to one usage object. */
  public sealed interface Result permits Applied, Invalid {}

  /**
   * The rule applied: {@code edits} (empty when {@code G} was already right) and the emitted numbers.
   * {@code impossible}: a count of {@code G} (or {@code C}'s cached count above its prompt) could not
   * be true, and what goes out in its place is the context worker's value or the clamp ({@link Count}).
   */
  public record Applied(ByteEdits edits, UsageFigures figures, boolean impossible) implements Result {
    /** True when the emitted usage differs from the generation worker's. */
    public boolean corrected() {
      return !edits.isEmpty();
    }
  }

  /**
   * {@code G} is not something the rule may touch: a required count missing, or a details object of
   * the wrong type.
   */
  public record Invalid(String reason) implements Result {}

  private UsageRule() {}

  /** A member name as JSON text. */
  static String quote(String key) {
    // Keys written here are fixed usage names or keys already read from a JSON document.
    return '"' + new String(JsonStringEncoder.getInstance().quoteAsString(key)) + '"';
  }

  /**
   * Sets count member {@code name} of {@code g} ({@code m}, null when absent) to {@code value}: replaced
   * when it is anything else (another number, a spelling such as {@code 7.0}, null, a string), inserted
   * before the closing brace when absent and {@code addIfAbsent}.
   */
  static void setCount(
      JsonObjectView g, Member m, String name, BigInteger value, boolean addIfAbsent, ByteEdits edits) {
    if (m == null) {
      if (addIfAbsent) {
        edits.insert(g.closingBrace(), (g.isEmpty() ? "" : ",") + quote(name) + ":" + value);
      }
    } else if (m.integer() == null || !m.integer().equals(value)) {
      edits.replace(m.start(), m.end(), value.toString());
    }
  }

  /**
   * Clamps every count of {@code names} that {@code view} (may be null) states and that could not be
   * true ({@link Count}); true when there was one.
   */
  static boolean clampListed(JsonObjectView view, Iterable<String> names, byte[] doc, ByteEdits edits) {
    boolean impossible = false;
    if (view == null) {
      return false;
    }
    for (String name : names) {
      Member m = view.get(name);
      Count count = Count.of(m, doc, true);
      if (count != null && !count.possible()) {
        impossible = true;
        setCount(view, m, name, count.value(), false, edits);
      }
    }
    return impossible;
  }

  /** The member's exact integer value; null when absent or not an integer. */
  static BigInteger integer(Member m) {
    return m == null ? null : m.integer();
  }
}
