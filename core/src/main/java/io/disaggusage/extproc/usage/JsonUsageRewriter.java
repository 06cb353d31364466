package io.disaggusage.extproc.usage;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.json.ByteEdits;
import io.disaggusage.extproc.json.JsonObjectView;

/**
 * Rewrites the usage of one complete JSON document (a generation response body, or the data of one
 * SSE event) with its {@link ApiShape}'s rule. Bytes outside the usage object never change; a document that
 * does not parse, or whose usage the rule may not touch, is returned as it came with the reason.
 */
public final class JsonUsageRewriter {

  /** What happened to one document. */
  public sealed interface Result permits Rewritten, NoUsage, Rejected {}

  /**
   * The rule was applied. {@code document} is the input array itself when nothing changed;
   * {@code edits} are the changes relative to the input, for callers that patch a larger buffer;
   * {@code impossible}: the usage held a count that could not be true ({@link UsageRule.Applied}).
   */
  public record Rewritten(
      byte[] document, ByteEdits edits, UsageFigures figures, boolean corrected, String model, boolean impossible)
      implements Result {}

  /** The document parses but carries no (non-null) usage object: nothing to do. */
  public record NoUsage(String model) implements Result {}

  /** The document passes through unchanged because of {@code reason}. */
  public record Rejected(Reason reason, String detail) implements Result {}

  /** Why a document was left alone. */
  public enum Reason {
    MALFORMED,
    INVALID_USAGE,
    OVERSIZE_USAGE
  }

  private final JsonFactory factory;
  private final int maxUsageBytes;

  public JsonUsageRewriter(JsonFactory factory, int maxUsageBytes) {
    this.factory = factory;
    this.maxUsageBytes = maxUsageBytes;
  }

  /**
   * Applies the §2 rule with context usage {@code c} (null: none, only impossible counts are clamped)
   * to the usage inside {@code doc}, a whole response body.
   */
  public Result rewrite(byte[] doc, ContextUsage c, ApiShape shape) {
    return rewrite(doc, c, shape, false);
  }

  /**
   * {@link #rewrite} for the data of one SSE event: members are added only when it is not a content
   * event ({@link UsageDocument#carriesContent}), whose running usage keeps its own shape.
   */
  public Result rewriteEvent(byte[] doc, ContextUsage c, ApiShape shape) {
    return rewrite(doc, c, shape, true);
  }

  private Result rewrite(byte[] doc, ContextUsage c, ApiShape shape, boolean event) {
    UsageDocument parsed;
    try {
      parsed = UsageDocument.parse(factory, doc);
    } catch (UsageDocument.MalformedException e) {
      return new Rejected(Reason.MALFORMED, e.getMessage());
    }
    JsonObjectView usage = parsed.usage();
    if (usage == null) {
      return new NoUsage(parsed.model());
    }
    if (usage.end() - usage.start() > maxUsageBytes) {
      return new Rejected(Reason.OVERSIZE_USAGE, "usage object above limits.max_usage_bytes");
    }
    UsageRule.Result result = shape.apply(c, usage, doc, !(event && parsed.carriesContent()));
    if (result instanceof UsageRule.Invalid invalid) {
      return new Rejected(Reason.INVALID_USAGE, invalid.reason());
    }
    UsageRule.Applied applied = (UsageRule.Applied) result;
    byte[] out = applied.corrected() ? applied.edits().applyTo(doc, 0, doc.length) : doc;
    return new Rewritten(
        out, applied.edits(), applied.figures(), applied.corrected(), parsed.model(), applied.impossible());
  }

  /**
   * Applies the §2 rule (with {@code c} null: the clamp alone) to a usage object that is the whole of
   * {@code usage[0, length)}: a fragment
   * the caller cut from a larger document it has checked itself. A {@link Rewritten} result's
   * {@code document} is {@code usage} itself and its {@code edits} are relative to it, so they also
   * patch a larger buffer that starts with the object; its {@code model} is null.
   */
  public Result rewriteObject(byte[] usage, int length, ContextUsage c, ApiShape shape) {
    if (length > maxUsageBytes) {
      return new Rejected(Reason.OVERSIZE_USAGE, "usage object above limits.max_usage_bytes");
    }
    JsonObjectView view;
    try {
      view = UsageDocument.usageObject(factory, usage, length);
    } catch (UsageDocument.MalformedException e) {
      return new Rejected(Reason.MALFORMED, e.getMessage());
    }
    UsageRule.Result result = shape.apply(c, view, usage, true);
    if (result instanceof UsageRule.Invalid invalid) {
      return new Rejected(Reason.INVALID_USAGE, invalid.reason());
    }
    UsageRule.Applied applied = (UsageRule.Applied) result;
    return new Rewritten(usage, applied.edits(), applied.figures(), applied.corrected(), null, applied.impossible());
  }

  /**
   * The figures a usage object that is the whole of {@code usage[0, length)} states about itself;
   * null when it does not parse.
   */
  public UsageFigures inspectObject(byte[] usage, int length, ApiShape shape) {
    try {
      return shape.figuresOf(UsageDocument.usageObject(factory, usage, length));
    } catch (UsageDocument.MalformedException e) {
      return null;
    }
  }

  /** The largest usage object the rule is applied to ({@code limits.max_usage_bytes}). */
  public int maxUsageBytes() {
    return maxUsageBytes;
  }

  /**
   * The generation worker's own figures in {@code doc}, for metadata when the rule is not applied;
   * null when the document has no usable usage.
   */
  public UsageFigures inspect(byte[] doc, ApiShape shape) {
    try {
      JsonObjectView usage = UsageDocument.parse(factory, doc).usage();
      return usage == null ? null : shape.figuresOf(usage);
    } catch (UsageDocument.MalformedException e) {
      return null;
    }
  }
}
