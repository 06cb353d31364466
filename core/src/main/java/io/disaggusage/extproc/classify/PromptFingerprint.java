package io.disaggusage.extproc.classify;

/**
 * What both legs of one disaggregated flow share: a 128-bit digest of the request's model and its
 * prompt-bearing members over their canonical value, never of the members an orchestrator changes
 * between legs. A context usage is bound to (correlation key, fingerprint), so a colliding or forged
 * key cannot hand one flow's usage to another.
 */
public record PromptFingerprint(long high, long low) {

  /** 32 lower-case hex digits: how the fingerprint is stored (Redis) and compared. */
  public String hex() {
    return String.format("%016x%016x", high, low);
  }
}
