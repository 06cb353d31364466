package io.disaggusage.extproc.rewrite;

import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.usage.ApiShape;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.JsonUsageRewriter;

/**
 * The usage rewrite of a JSON generation body's held part (behaviour.md, "JSON bodies"): what it goes
 * out as with the context usage or the fallback, noted in the leg's {@link JsonOutcome}. The rule
 * itself — which fields, which engines — is {@link JsonUsageRewriter}'s; nothing here scans or holds.
 */
final class JsonUsageRewrite {
  private final JsonUsageRewriter rewriter;
  private final ApiShape shape;
  private final ContextResolution resolved;
  private final JsonOutcome outcome;

  JsonUsageRewrite(JsonUsageRewriter rewriter, ApiShape shape, ContextResolution resolved, JsonOutcome outcome) {
    this.rewriter = rewriter;
    this.shape = shape;
    this.resolved = resolved;
    this.outcome = outcome;
  }

  /**
   * The bytes {@code held} goes out as. An unexpected failure costs only this body's correction: the
   * held bytes then go out exactly as they came.
   */
  byte[] release(HeldJsonBytes held) {
    try {
      return rewrite(held);
    } catch (RuntimeException e) {
      outcome.released(Outcome.ERROR, null, false);
      return held.copy();
    }
  }

  private byte[] rewrite(HeldJsonBytes held) {
    ContextUsage context = resolved.usage();
    byte[] bytes = held.array();
    JsonUsageRewriter.Result result = rewriter.rewriteObject(bytes, held.usageLength(), context, shape);
    if (result instanceof JsonUsageRewriter.Rewritten r) {
      outcome.released(r.impossible() ? Outcome.IMPOSSIBLE_COUNT : resolved.applied(), r.figures(), r.corrected());
      return r.corrected() ? r.edits().applyTo(bytes, 0, held.length()) : held.copy();
    }
    if (context == null) {
      // Left alone without context usage: the worker's own figures, under the fallback's outcome.
      outcome.released(resolved.fallback(), rewriter.inspectObject(bytes, held.usageLength(), shape), false);
    } else {
      outcome.released(Outcome.of((JsonUsageRewriter.Rejected) result), null, false);
    }
    return held.copy();
  }
}
