package io.disaggusage.extproc.usage;

import com.fasterxml.jackson.core.JsonToken;
import io.disaggusage.extproc.json.JsonObjectView.Member;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.util.regex.Pattern;

/**
 * One count member of a usage object as a client may be shown it (behaviour.md, "Counts that cannot
 * be true"). A count is possible when it is a JSON integer ≥ 0; a detail count may also be null (not
 * stated). Anything else is impossible and is clamped: a negative integer to 0; a number with a
 * fraction or exponent to its integer part (0 when negative, and 0 when that part has more than
 * {@value #MAX_DIGITS} digits, more than any number the service reads); a string holding a JSON number
 * as that number, clamped the same way; any other value (another string, a boolean, an array, an
 * object, null where a count is required) to 0.
 *
 * @param value the count to show; null only for a possible null
 * @param reported the member's exact integer value, negative ones included; null when it is not an
 *     integer
 * @param possible whether the member may go out as it is
 */
record Count(BigInteger value, BigInteger reported, boolean possible) {
  /** More integer digits than any number the service's parser accepts. */
  static final int MAX_DIGITS = 1000;

  private static final Pattern JSON_NUMBER = Pattern.compile("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?");
  private static final Count NULL = new Count(null, null, true);

  /** The count {@code m} states (null when {@code m} is absent); {@code nullable}: null is a possible value. */
  static Count of(Member m, byte[] doc, boolean nullable) {
    if (m == null) {
      return null;
    }
    if (m.isNull()) {
      return nullable ? NULL : impossible(null);
    }
    if (m.integer() != null) {
      return m.integer().signum() >= 0 ? new Count(m.integer(), m.integer(), true) : impossible(m.integer());
    }
    if (m.kind() == JsonToken.VALUE_NUMBER_FLOAT) {
      return new Count(clamp(text(doc, m.start(), m.end())), null, false);
    }
    if (m.kind() == JsonToken.VALUE_STRING) {
      String inner = text(doc, m.start() + 1, m.end() - 1); // a JSON number needs no escapes
      return new Count(JSON_NUMBER.matcher(inner).matches() ? clamp(inner) : BigInteger.ZERO, null, false);
    }
    return impossible(null);
  }

  /** A count to show in place of a stated impossible one. */
  private static Count impossible(BigInteger reported) {
    return new Count(BigInteger.ZERO, reported, false);
  }

  /** The clamped value of a JSON number's text. */
  private static BigInteger clamp(String number) {
    if (number.length() > MAX_DIGITS) {
      return BigInteger.ZERO;
    }
    BigDecimal value = new BigDecimal(number);
    int integerDigits = value.precision() - value.scale();
    if (value.signum() <= 0 || integerDigits <= 0 || integerDigits > MAX_DIGITS) {
      return BigInteger.ZERO; // negative, below 1, or beyond any count (never expanded: 1e999999999)
    }
    return value.setScale(0, RoundingMode.DOWN).toBigIntegerExact();
  }

  private static String text(byte[] doc, int from, int to) {
    return new String(doc, from, to - from, StandardCharsets.UTF_8);
  }

  /** The value to show, or {@code orElse} when it is null. */
  BigInteger or(BigInteger orElse) {
    return value == null ? orElse : value;
  }
}
