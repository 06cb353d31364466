package io.disaggusage.extproc.rewrite;

import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.usage.ContextUsage;

/**
 * A body filter whose output needs the context usage: the generation leg's. Besides the chunks the
 * caller supplies the context usage when the rewriter asks for it, and publishes the usage figures
 * as soon as a usage-bearing event has gone out.
 */
public interface GenerationRewriter extends ResponseBodyProcessor {

  /**
   * True once the rewriter holds bytes that need the context usage and has not been given it yet:
   * the caller starts (once) an asynchronous wait and later calls {@link #resolveContext}.
   */
  boolean wantsContext();

  /** True while held bytes still wait for {@link #resolveContext}. */
  boolean waiting();

  /**
   * Supplies the context usage, or null when there is none (deadline passed, or the flow has no
   * context phase): held bytes are then released under the fallback.
   */
  void resolveContext(ContextUsage context, Outcome reasonIfNull);

  /**
   * How many usage-bearing events (or usage objects) have left through {@link #takeReady} so far. Once
   * one has, the client may have read its usage and hang up before the body ends (sglang-router closes
   * right after {@code data: [DONE]}): the caller publishes {@link #report} with that reply.
   */
  int usageReleased();
}
