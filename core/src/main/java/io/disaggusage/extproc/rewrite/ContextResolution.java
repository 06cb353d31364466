package io.disaggusage.extproc.rewrite;

import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.usage.ContextUsage;

/**
 * What a {@link GenerationRewriter} was told about its context usage: the first {@link
 * GenerationRewriter#resolveContext} call wins and later ones are ignored.
 */
final class ContextResolution {
  private boolean known;
  private ContextUsage usage;
  private Outcome fallback = Outcome.CONTEXT_TIMEOUT;

  /**
   * Records the context usage (null: none) and, with none, the outcome held bytes are released
   * under ({@code reasonIfNull}; null keeps {@link Outcome#CONTEXT_TIMEOUT}).
   *
   * @return false when the context usage was already resolved: nothing changed
   */
  boolean resolve(ContextUsage context, Outcome reasonIfNull) {
    if (known) {
      return false;
    }
    known = true;
    usage = context;
    if (context == null && reasonIfNull != null) {
      fallback = reasonIfNull;
    }
    return true;
  }

  /** Whether {@link #resolve} was called. */
  boolean known() {
    return known;
  }

  /** The context usage, or null while unknown or when there is none. */
  ContextUsage usage() {
    return usage;
  }

  /** The outcome of usage rewritten now: {@link Outcome#REWRITTEN} with context usage, else the fallback. */
  Outcome applied() {
    return usage == null ? fallback : Outcome.REWRITTEN;
  }

  /** The outcome of usage released without context usage. */
  Outcome fallback() {
    return fallback;
  }
}
