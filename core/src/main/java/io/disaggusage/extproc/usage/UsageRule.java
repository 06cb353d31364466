package io.disaggusage.extproc.usage;

import io.disaggusage.extproc.json.ByteEdits;
import io.disaggusage.extproc.json.JsonObjectView;
import io.disaggusage.extproc.json.JsonObjectView.Member;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;

/**
 * The rewrite rule of behaviour.md §2, as byte edits on the generation worker's usage object:
 * prompt accounting from the context worker ({@code C}), completion accounting from the generation
 * worker ({@code G}), total recomputed. Values that already match are left alone, so the rule is
 * idempotent and an engine that already corrected its usage comes out byte-identical.
 */
public final class UsageRule {

  /** The result of applying the rule to one usage object. */
  public sealed interface Result permits Applied, Invalid {}

  /**
   * The rule applied: {@code edits} (empty when {@code G} was already right) and the emitted numbers.
   */
  public record Applied(ByteEdits edits, UsageFigures figures) implements Result {
    /** True when the emitted usage differs from the generation worker's. */
    public boolean corrected() {
      return !edits.isEmpty();
    }
  }

  /** {@code G} is not something the rule may touch (counts not non-negative integers, wrong types). */
  public record Invalid(String reason) implements Result {}

  private UsageRule() {}

  /**
   * Applies the rule to {@code g}, the generation worker's usage object as laid out in {@code doc}.
   */
  public static Result apply(ContextUsage c, JsonObjectView g, byte[] doc, UsageNames names) {
    if (names == UsageNames.MESSAGES) {
      return MessagesUsageRule.apply(c, g);
    }
    Member gPrompt = g.get(names.prompt());
    Member gCompletion = g.get(names.completion());
    Member gTotal = g.get(UsageNames.TOTAL);
    Member gDetails = g.get(names.promptDetails());
    if (gPrompt != null && !gPrompt.isNonNegativeInteger()) {
      return new Invalid(names.prompt() + " is not a non-negative integer");
    }
    if (gCompletion == null || !gCompletion.isNonNegativeInteger()) {
      return new Invalid(names.completion() + " is missing or not a non-negative integer");
    }
    if (gTotal != null && !gTotal.isNonNegativeInteger()) {
      return new Invalid(UsageNames.TOTAL + " is not a non-negative integer");
    }
    BigInteger reportedCached = null;
    if (gDetails != null && !gDetails.isNull()) {
      if (gDetails.object() == null) {
        return new Invalid(names.promptDetails() + " is not an object");
      }
      Member cached = gDetails.object().get(UsageNames.CACHED);
      if (cached != null && !cached.isNull()) {
        if (!cached.isNonNegativeInteger()) {
          return new Invalid(names.promptDetails() + ".cached_tokens is not a non-negative integer");
        }
        reportedCached = cached.integer();
      }
    }

    BigInteger prompt = c.promptTokens();
    BigInteger completion = gCompletion.integer();
    BigInteger total = prompt.add(completion);
    BigInteger cached = c.cachedTokens().min(prompt);
    Map<String, String> details = wantedDetails(c, cached);

    ByteEdits edits = new ByteEdits();
    if (gPrompt == null) {
      edits.insert(g.closingBrace(), "," + quote(names.prompt()) + ":" + prompt);
    } else if (!gPrompt.integer().equals(prompt)) {
      edits.replace(gPrompt.start(), gPrompt.end(), prompt.toString());
    }
    if (gDetails == null) {
      edits.insert(g.closingBrace(), "," + quote(names.promptDetails()) + ":" + objectText(details));
    } else if (gDetails.isNull()) {
      edits.replace(gDetails.start(), gDetails.end(), objectText(details));
    } else {
      mergeDetails(gDetails.object(), details, doc, edits);
    }
    if (gTotal == null) {
      edits.insert(g.closingBrace(), "," + quote(UsageNames.TOTAL) + ":" + total);
    } else if (!gTotal.integer().equals(total)) {
      edits.replace(gTotal.start(), gTotal.end(), total.toString());
    }
    return new Applied(edits, new UsageFigures(prompt, cached, completion, total, reportedCached));
  }

  /**
   * Reads {@code C} from a context worker's usage object of any shape (an Anthropic one through
   * {@link MessagesUsageRule#context}). Empty when {@code C} is unusable: prompt count missing or not a
   * non-negative integer, details not an object, or a present non-null {@code cached_tokens} that is
   * not a non-negative integer.
   */
  public static Optional<ContextUsage> context(JsonObjectView c, byte[] doc) {
    UsageNames names = UsageNames.detect(c.members().keySet());
    if (names == UsageNames.MESSAGES) {
      return MessagesUsageRule.context(c);
    }
    Member prompt = c.get(names.prompt());
    if (prompt == null || !prompt.isNonNegativeInteger()) {
      return Optional.empty();
    }
    Member detailsMember = c.get(names.promptDetails());
    Map<String, String> details = new LinkedHashMap<>();
    BigInteger cached = BigInteger.ZERO;
    if (detailsMember != null && !detailsMember.isNull()) {
      JsonObjectView view = detailsMember.object();
      if (view == null) {
        return Optional.empty();
      }
      for (Member m : view.members().values()) {
        if (m.name().equals(UsageNames.CACHED) && !m.isNull()) {
          if (!m.isNonNegativeInteger()) {
            return Optional.empty();
          }
          cached = m.integer();
        }
        details.put(m.name(), text(doc, m));
      }
    }
    return Optional.of(new ContextUsage(prompt.integer(), details, cached));
  }

  /**
   * Whether a usage object states a prompt count at all (a non-null {@code prompt_tokens} or
   * {@code input_tokens}), usable or not.
   */
  public static boolean statesPrompt(JsonObjectView usage) {
    for (String name : new String[] {UsageNames.CHAT.prompt(), UsageNames.RESPONSES.prompt()}) {
      Member m = usage.get(name);
      if (m != null && !m.isNull()) {
        return true;
      }
    }
    return false;
  }

  /** C's detail keys with C's values, {@code cached_tokens} set to the clamped count (first if new). */
  private static Map<String, String> wantedDetails(ContextUsage c, BigInteger cached) {
    Map<String, String> wanted = new LinkedHashMap<>();
    if (!c.details().containsKey(UsageNames.CACHED)) {
      wanted.put(UsageNames.CACHED, cached.toString());
    }
    c.details()
        .forEach((k, v) -> wanted.put(k, k.equals(UsageNames.CACHED) ? cached.toString() : v));
    return wanted;
  }

  private static void mergeDetails(
      JsonObjectView g, Map<String, String> wanted, byte[] doc, ByteEdits edits) {
    boolean needsComma = !g.isEmpty();
    for (Map.Entry<String, String> e : wanted.entrySet()) {
      Member m = g.get(e.getKey());
      if (m == null) {
        edits.insert(g.closingBrace(), (needsComma ? "," : "") + quote(e.getKey()) + ":" + e.getValue());
        needsComma = true;
      } else if (!sameValue(doc, m, e.getValue())) {
        edits.replace(m.start(), m.end(), e.getValue());
      }
    }
  }

  private static boolean sameValue(byte[] doc, Member m, String wanted) {
    if (m.integer() != null) {
      return m.integer().toString().equals(wanted);
    }
    return text(doc, m).equals(wanted);
  }

  private static String text(byte[] doc, Member m) {
    return new String(doc, m.start(), m.end() - m.start(), StandardCharsets.UTF_8);
  }

  private static String objectText(Map<String, String> members) {
    StringBuilder sb = new StringBuilder("{");
    members.forEach(
        (k, v) -> {
          if (sb.length() > 1) {
            sb.append(',');
          }
          sb.append(quote(k)).append(':').append(v);
        });
    return sb.append('}').toString();
  }

  static String quote(String key) {
    // Keys written here are fixed usage names or keys already read from a JSON document.
    return '"' + new String(com.fasterxml.jackson.core.io.JsonStringEncoder.getInstance().quoteAsString(key))
        + '"';
  }
}
