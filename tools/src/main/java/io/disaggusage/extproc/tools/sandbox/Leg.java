package io.disaggusage.extproc.tools.sandbox;

import java.util.Locale;

/** One of an orchestrator's two worker calls, and the shipped bootstrap's listener and cluster for it. */
enum Leg {
  CONTEXT,
  GENERATION;

  /** {@code context} or {@code generation}: the shipped cluster's name, and part of the sandbox's names. */
  String label() {
    return name().toLowerCase(Locale.ROOT);
  }

  /** The shipped listener this leg's listeners are copied from ({@code context_egress} ...). */
  String shippedListener() {
    return label() + "_egress";
  }

  /** The shipped cluster this leg's clusters are copied from. */
  String shippedCluster() {
    return label();
  }
}
