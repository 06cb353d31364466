package io.disaggusage.extproc.exchange;

import io.disaggusage.extproc.label.LowerCaseLabel;

/**
 * Which leg of a disaggregated request an exchange is (behaviour.md §3). Metric labels and dynamic
 * metadata show its {@linkplain #label() label}, the constant's name in lower case.
 */
public enum Phase implements LowerCaseLabel {
  CONTEXT,
  GENERATION,
  /** Not part of a disaggregated flow: passed through untouched. */
  NONE
}
