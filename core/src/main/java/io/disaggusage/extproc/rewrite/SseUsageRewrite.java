package io.disaggusage.extproc.rewrite;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.json.ByteEdits;
import io.disaggusage.extproc.sse.SseEvent;
import io.disaggusage.extproc.usage.ApiShape;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.JsonUsageRewriter;
import io.disaggusage.extproc.usage.UsageDocument;
import java.util.ArrayList;
import java.util.List;

/**
 * The usage rewrite of one SSE event (behaviour.md §5): whether it carries usage, and what it becomes
 * with the context usage or the fallback, noted in the leg's {@link SseOutcome}. The rule itself —
 * which fields, which engines — is {@link JsonUsageRewriter}'s; nothing here frames or holds.
 */
final class SseUsageRewrite {
  private final JsonUsageRewriter rewriter;
  private final JsonFactory json;
  private final ApiShape shape;
  private final ContextResolution resolved;
  private final SseOutcome outcome;

  SseUsageRewrite(
      JsonUsageRewriter rewriter, JsonFactory json, ApiShape shape, ContextResolution resolved, SseOutcome outcome) {
    this.rewriter = rewriter;
    this.json = json;
    this.shape = shape;
    this.resolved = resolved;
    this.outcome = outcome;
  }

  /** Whether the event's JSON has a non-null usage object (parsing only events that may have one). */
  boolean carriesUsage(SseEvent event) {
    if (!event.hasData() || !event.mayContainUsage()) {
      return false;
    }
    if (resolved.known()) {
      return true; // rewrite() parses anyway and treats a usage-less event as content
    }
    try {
      return UsageDocument.parse(json, event.payloadBytes()).usage() != null;
    } catch (UsageDocument.MalformedException e) {
      outcome.parseError(); // counted; the event goes out as it came
      return false;
    }
  }

  /** The bytes {@code event}, which may carry usage, goes out as: patched, or as it came. */
  byte[] rewrite(SseEvent event) {
    byte[] payload = event.payloadBytes();
    ContextUsage context = resolved.usage();
    JsonUsageRewriter.Result result = rewriter.rewriteEvent(payload, context, shape);
    Outcome applied = resolved.applied();
    if (result instanceof JsonUsageRewriter.Rewritten r) {
      outcome.rewritten(applied, r);
      if (r.corrected()) {
        return event.patchedRaw(patches(r.edits()));
      }
    } else if (context == null) {
      // Left alone without context usage: the worker's own figures, under the fallback's outcome.
      var own = rewriter.inspect(payload, shape);
      if (own != null) {
        outcome.record(applied, new ExchangeReport(applied, own, false, null));
      }
    } else if (result instanceof JsonUsageRewriter.Rejected rejected) {
      outcome.record(Outcome.of(rejected), null);
    } else if (result instanceof JsonUsageRewriter.NoUsage n) {
      outcome.model(n.model());
    }
    return event.rawArray();
  }

  private static List<SseEvent.Patch> patches(ByteEdits edits) {
    List<SseEvent.Patch> patches = new ArrayList<>(4);
    for (ByteEdits.Edit edit : edits.sorted()) {
      patches.add(new SseEvent.Patch(edit.start(), edit.end(), edit.text()));
    }
    return patches;
  }
}
