package io.disaggusage.extproc.label;

/**
 * An enum whose label (the word metrics, dynamic metadata and the documentation show for a constant)
 * is the constant's name in lower case: {@code PASSTHROUGH_NO_CONTEXT} is labelled
 * {@code passthrough_no_context}. The constants are named after their labels, so the label is derived
 * from the name rather than written a second time beside it.
 */
public interface LowerCaseLabel {

  /** The constant's name; {@link Enum#name()} implements it. */
  String name();

  /** The constant's position; {@link Enum#ordinal()} implements it. */
  int ordinal();

  /** The constant's name in lower case, worked out once per enum (labels are read on every exchange). */
  default String label() {
    return LowerCaseLabels.of(this);
  }
}
