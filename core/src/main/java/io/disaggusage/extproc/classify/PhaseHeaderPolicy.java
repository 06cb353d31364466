package io.disaggusage.extproc.classify;

/**
 * What an {@code x-disagg-phase} header may decide ({@code classification.phase_header}). A header is
 * what a client can send and most routers forward to both legs, so it never outranks the cluster or a
 * body marker; this chooses whether it may decide where neither does.
 */
public enum PhaseHeaderPolicy {
  /**
   * The header decides only an exchange that neither a configured cluster nor a body marker decides
   * (default). Such an exchange is a leg of no router the service knows by its body; a forged header on
   * it can make a client's own request a context or generation leg, whose usage then stays bound to
   * its own prompt.
   */
  FALLBACK,
  /** The header never decides: only clusters and body markers do. */
  IGNORE
}
