package io.disaggusage.extproc.exchange;

/** Which leg of a disaggregated request an exchange is (behaviour.md §3). */
public enum Phase {
  CONTEXT("context"),
  GENERATION("generation"),
  /** Not part of a disaggregated flow: passed through untouched. */
  NONE("none");

  private final String label;

  Phase(String label) {
    this.label = label;
  }

  /** The value used in metric labels and dynamic metadata. */
  public String label() {
    return label;
  }
}
