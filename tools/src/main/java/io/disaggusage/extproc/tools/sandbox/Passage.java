package io.disaggusage.extproc.tools.sandbox;

/**
 * Which way an orchestrator's worker calls go: through Envoy listeners with the shipped ext_proc filter
 * (the service corrects the usage), or through copies of them without it (the client reads what the
 * generation worker wrote). Only the filter differs, so the two answers show what the service changes.
 */
enum Passage {
  THROUGH_SERVICE("", "through the service"),
  AROUND_SERVICE("_without_extproc", "around the service");

  private final String listenerSuffix;
  private final String description;

  Passage(String listenerSuffix, String description) {
    this.listenerSuffix = listenerSuffix;
    this.description = description;
  }

  /** {@code through the service} or {@code around the service}. */
  String description() {
    return description;
  }

  /** The Envoy listener name for {@code leg} of {@code family}'s calls, e.g. {@code vllm_context_egress}. */
  String listenerName(Family family, Leg leg) {
    return family.key() + "_" + leg.shippedListener() + listenerSuffix;
  }

  boolean extProc() {
    return this == THROUGH_SERVICE;
  }
}
