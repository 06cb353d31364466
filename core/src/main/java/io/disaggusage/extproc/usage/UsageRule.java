package io.disaggusage.extproc.usage;

import com.fasterxml.jackson.core.io.JsonStringEncoder;
import io.disaggusage.extproc.json.ByteEdits;
import io.disaggusage.extproc.json.JsonObjectView.Member;
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
   */
  public record Applied(ByteEdits edits, UsageFigures figures) implements Result {
    /** True when the emitted usage differs from the generation worker's. */
    public boolean corrected() {
      return !edits.isEmpty();
    }
  }

  /** {@code G} is not something the rule may touch (counts not non-negative integers, wrong types). */
  public record Invalid(String reason) implements Result {}

  private UsageRule() {}

  /** A member name as JSON text. */
  static String quote(String key) {
    // Keys written here are fixed usage names or keys already read from a JSON document.
    return '"' + new String(JsonStringEncoder.getInstance().quoteAsString(key)) + '"';
  }

  /** The member's exact integer value; null when absent or not an integer. */
  static BigInteger integer(Member m) {
    return m == null ? null : m.integer();
  }
}
