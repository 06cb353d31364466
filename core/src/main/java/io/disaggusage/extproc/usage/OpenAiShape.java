package io.disaggusage.extproc.usage;

import io.disaggusage.extproc.json.ByteEdits;
import io.disaggusage.extproc.json.JsonObjectView.Member;
import io.disaggusage.extproc.json.JsonObjectView;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * The OpenAI usage object and its rule (behaviour.md §2): a prompt count, a details object holding
 * {@code cached_tokens}, a completion count and {@code total_tokens}. Prompt accounting comes from the
 * context worker ({@code C}), completion accounting from the generation worker ({@code G}), the total
 * is recomputed. Values that already match are left alone, so the rule is idempotent and an engine that
 * already corrected its usage comes out byte-identical. Subclasses name the members, the paths and
 * the usage containers. A usage object of this shape is recognised by its prompt member.
 */
abstract class OpenAiShape implements ApiShape {
  static final String TOTAL = "total_tokens";
  static final String CACHED = "cached_tokens";

  private final String pathSuffix;
  private final Set<String> usageContainers;
  private final boolean injectsIncludeUsage;
  private final String prompt;
  private final String promptDetails;
  private final String completion;

  /**
   * @param pathSuffix how the paths served end
   * @param usageContainers see {@link ApiShape#usageContainers}
   * @param injectsIncludeUsage see {@link ApiShape#injectsIncludeUsage}
   * @param prompt the prompt count member
   * @param promptDetails the details member holding {@code cached_tokens}
   * @param completion the completion count member
   */
  OpenAiShape(
      String pathSuffix,
      Set<String> usageContainers,
      boolean injectsIncludeUsage,
      String prompt,
      String promptDetails,
      String completion) {
    this.pathSuffix = pathSuffix;
    this.usageContainers = usageContainers;
    this.injectsIncludeUsage = injectsIncludeUsage;
    this.prompt = prompt;
    this.promptDetails = promptDetails;
    this.completion = completion;
  }

  @Override
  public boolean serves(String path) {
    return path.endsWith(pathSuffix);
  }

  @Override
  public Set<String> usageContainers() {
    return usageContainers;
  }

  @Override
  public boolean recognises(Set<String> usageMembers) {
    return usageMembers.contains(prompt);
  }

  @Override
  public boolean injectsIncludeUsage() {
    return injectsIncludeUsage;
  }

  @Override
  public String promptMember() {
    return prompt;
  }

  /** The usage member holding the prompt details ({@code cached_tokens} and others). */
  public String promptDetailsMember() {
    return promptDetails;
  }

  /** The usage member stating the completion count. */
  public String completionMember() {
    return completion;
  }

  @Override
  public Set<String> usageDetailObjects() {
    return Set.of(promptDetails);
  }

  @Override
  public UsageRule.Result apply(ContextUsage c, JsonObjectView g, byte[] doc) {
    Member gPrompt = g.get(prompt);
    Member gCompletion = g.get(completion);
    Member gTotal = g.get(TOTAL);
    Member gDetails = g.get(promptDetails);
    if (gPrompt != null && !gPrompt.isNonNegativeInteger()) {
      return new UsageRule.Invalid(prompt + " is not a non-negative integer");
    }
    if (gCompletion == null || !gCompletion.isNonNegativeInteger()) {
      return new UsageRule.Invalid(completion + " is missing or not a non-negative integer");
    }
    if (gTotal != null && !gTotal.isNonNegativeInteger()) {
      return new UsageRule.Invalid(TOTAL + " is not a non-negative integer");
    }
    BigInteger reportedCached = null;
    if (gDetails != null && !gDetails.isNull()) {
      if (gDetails.object() == null) {
        return new UsageRule.Invalid(promptDetails + " is not an object");
      }
      Member cached = gDetails.object().get(CACHED);
      if (cached != null && !cached.isNull()) {
        if (!cached.isNonNegativeInteger()) {
          return new UsageRule.Invalid(promptDetails + ".cached_tokens is not a non-negative integer");
        }
        reportedCached = cached.integer();
      }
    }

    BigInteger promptTokens = c.promptTokens();
    BigInteger completionTokens = gCompletion.integer();
    BigInteger total = promptTokens.add(completionTokens);
    BigInteger cached = c.cachedTokens().min(promptTokens);
    Map<String, String> details = wantedDetails(c, cached);

    ByteEdits edits = new ByteEdits();
    if (gPrompt == null) {
      edits.insert(g.closingBrace(), "," + UsageRule.quote(prompt) + ":" + promptTokens);
    } else if (!gPrompt.integer().equals(promptTokens)) {
      edits.replace(gPrompt.start(), gPrompt.end(), promptTokens.toString());
    }
    if (gDetails == null) {
      edits.insert(g.closingBrace(), "," + UsageRule.quote(promptDetails) + ":" + objectText(details));
    } else if (gDetails.isNull()) {
      edits.replace(gDetails.start(), gDetails.end(), objectText(details));
    } else {
      mergeDetails(gDetails.object(), details, doc, edits);
    }
    if (gTotal == null) {
      edits.insert(g.closingBrace(), "," + UsageRule.quote(TOTAL) + ":" + total);
    } else if (!gTotal.integer().equals(total)) {
      edits.replace(gTotal.start(), gTotal.end(), total.toString());
    }
    return new UsageRule.Applied(
        edits, new UsageFigures(promptTokens, cached, completionTokens, total, reportedCached));
  }

  /**
   * {@inheritDoc} Empty when the prompt count is missing or not a non-negative integer, the details
   * are not an object, or a present non-null {@code cached_tokens} is not a non-negative integer.
   */
  @Override
  public Optional<ContextUsage> context(JsonObjectView c, byte[] doc) {
    Member promptCount = c.get(prompt);
    if (promptCount == null || !promptCount.isNonNegativeInteger()) {
      return Optional.empty();
    }
    Member detailsMember = c.get(promptDetails);
    Map<String, String> details = new LinkedHashMap<>();
    BigInteger cached = BigInteger.ZERO;
    if (detailsMember != null && !detailsMember.isNull()) {
      JsonObjectView view = detailsMember.object();
      if (view == null) {
        return Optional.empty();
      }
      for (Member m : view.members().values()) {
        if (m.name().equals(CACHED) && !m.isNull()) {
          if (!m.isNonNegativeInteger()) {
            return Optional.empty();
          }
          cached = m.integer();
        }
        details.put(m.name(), text(doc, m));
      }
    }
    return Optional.of(new ContextUsage(promptCount.integer(), details, cached));
  }

  @Override
  public UsageFigures figuresOf(JsonObjectView usage) {
    BigInteger cached = null;
    Member details = usage.get(promptDetails);
    if (details != null && details.object() != null) {
      cached = UsageRule.integer(details.object().get(CACHED));
    }
    return new UsageFigures(
        UsageRule.integer(usage.get(prompt)),
        cached,
        UsageRule.integer(usage.get(completion)),
        UsageRule.integer(usage.get(TOTAL)),
        cached);
  }

  /** C's detail keys with C's values, {@code cached_tokens} set to the clamped count (first if new). */
  private static Map<String, String> wantedDetails(ContextUsage c, BigInteger cached) {
    Map<String, String> wanted = new LinkedHashMap<>();
    if (!c.details().containsKey(CACHED)) {
      wanted.put(CACHED, cached.toString());
    }
    c.details().forEach((k, v) -> wanted.put(k, k.equals(CACHED) ? cached.toString() : v));
    return wanted;
  }

  private static void mergeDetails(
      JsonObjectView g, Map<String, String> wanted, byte[] doc, ByteEdits edits) {
    boolean needsComma = !g.isEmpty();
    for (Map.Entry<String, String> e : wanted.entrySet()) {
      Member m = g.get(e.getKey());
      if (m == null) {
        edits.insert(
            g.closingBrace(), (needsComma ? "," : "") + UsageRule.quote(e.getKey()) + ":" + e.getValue());
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
          sb.append(UsageRule.quote(k)).append(':').append(v);
        });
    return sb.append('}').toString();
  }
}
