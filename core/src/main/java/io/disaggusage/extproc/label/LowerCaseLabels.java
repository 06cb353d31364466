package io.disaggusage.extproc.label;

import java.util.Arrays;
import java.util.Locale;

/** The labels of each {@link LowerCaseLabel} enum, lower-cased once when the enum is first labelled. */
final class LowerCaseLabels {
  private static final ClassValue<String[]> BY_ENUM =
      new ClassValue<>() {
        @Override
        protected String[] computeValue(Class<?> type) {
          return Arrays.stream(type.getEnumConstants())
              .map(constant -> ((Enum<?>) constant).name().toLowerCase(Locale.ROOT))
              .toArray(String[]::new);
        }
      };

  private LowerCaseLabels() {}

  static String of(LowerCaseLabel constant) {
    // The declaring class, not getClass(): a constant with a body is an instance of a subclass.
    return BY_ENUM.get(((Enum<?>) constant).getDeclaringClass())[constant.ordinal()];
  }
}
