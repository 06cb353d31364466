package io.disaggusage.extproc.usage;

import io.disaggusage.extproc.json.ByteEdits;
import io.disaggusage.extproc.json.JsonObjectView.Member;
import io.disaggusage.extproc.json.JsonObjectView;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
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
  private final String completionDetails;
  private final Set<String> promptDetailCounts;
  private final Set<String> completionDetailCounts;

  /**
   * @param pathSuffix how the paths served end
   * @param usageContainers see {@link ApiShape#usageContainers}
   * @param injectsIncludeUsage see {@link ApiShape#injectsIncludeUsage}
   * @param prompt the prompt count member
   * @param promptDetails the details member holding {@code cached_tokens}
   * @param completion the completion count member
   * @param api the shape's name in {@link UsageFields}, whose listed detail counts the rule reads
   */
  OpenAiShape(
      String api,
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
    this.completionDetails = completion + "_details";
    this.promptDetailCounts = UsageFields.detailCounts(api, promptDetails);
    this.completionDetailCounts = UsageFields.detailCounts(api, completionDetails);
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
    return Set.of(promptDetails, completionDetails);
  }

  @Override
  public UsageRule.Result apply(ContextUsage c, JsonObjectView g, byte[] doc, boolean addMembers) {
    Member gCompletionMember = g.get(completion);
    if (gCompletionMember == null) {
      return new UsageRule.Invalid(completion + " is missing");
    }
    Member gDetails = g.get(promptDetails);
    JsonObjectView gDetailsView = gDetails == null || gDetails.isNull() ? null : gDetails.object();
    if (gDetails != null && !gDetails.isNull() && gDetailsView == null) {
      return new UsageRule.Invalid(promptDetails + " is not an object");
    }
    Count gPrompt = Count.of(g.get(prompt), doc, false);
    Count gCompletion = Count.of(gCompletionMember, doc, false);
    Count gTotal = Count.of(g.get(TOTAL), doc, false);
    Count gCached = gDetailsView == null ? null : Count.of(gDetailsView.get(CACHED), doc, true);
    boolean countsClamped = !possible(gPrompt) || !gCompletion.possible();
    boolean impossible = countsClamped || !possible(gTotal) || !possible(gCached)
        || (gPrompt != null && gCached != null && gCached.or(BigInteger.ZERO).compareTo(gPrompt.value()) > 0);

    if (c != null && c.claimed()) {
      c = c.boundedBy(
          gPrompt == null ? null : gPrompt.value(),
          gCached == null || gCached.value() == null ? BigInteger.ZERO : gCached.value());
    }
    BigInteger promptTokens = c != null ? c.promptTokens() : gPrompt == null ? null : gPrompt.value();
    BigInteger completionTokens = gCompletion.value();
    BigInteger cached;
    if (c != null) {
      impossible |= c.cachedTokens().compareTo(c.promptTokens()) > 0;
      cached = c.cachedTokens().min(promptTokens);
    } else {
      cached = gCached == null || gCached.value() == null ? null
          : promptTokens == null ? gCached.value() : gCached.value().min(promptTokens);
    }
    BigInteger total;
    if (c != null || (promptTokens != null && (countsClamped || !possible(gTotal)))) {
      total = promptTokens.add(completionTokens);
    } else {
      total = gTotal != null ? gTotal.value() : promptTokens == null ? null : promptTokens.add(completionTokens);
    }

    ByteEdits edits = new ByteEdits();
    if (promptTokens != null) {
      UsageRule.setCount(g, g.get(prompt), prompt, promptTokens, addMembers, edits);
    }
    if (c != null) {
      setDetails(c, cached, g, gDetails, doc, addMembers, edits);
    } else if (gCached != null && gCached.value() != null) {
      UsageRule.setCount(gDetailsView, gDetailsView.get(CACHED), CACHED, cached, false, edits);
    }
    // G's own listed detail counts that C does not state, and its completion details, are G's.
    Set<String> stated = c == null ? Set.of(CACHED) : c.details().keySet();
    impossible |= UsageRule.clampListed(gDetailsView, unstated(promptDetailCounts, stated), doc, edits);
    Member gCompletionDetails = g.get(completionDetails);
    impossible |= UsageRule.clampListed(
        gCompletionDetails == null ? null : gCompletionDetails.object(), completionDetailCounts, doc, edits);
    UsageRule.setCount(g, gCompletionMember, completion, completionTokens, false, edits);
    if (total != null) {
      UsageRule.setCount(g, g.get(TOTAL), TOTAL, total, c != null && addMembers, edits);
    }
    BigInteger reportedCached = gCached == null ? null : gCached.reported();
    return new UsageRule.Applied(
        edits, new UsageFigures(promptTokens, cached, completionTokens, total, reportedCached), impossible);
  }

  /**
   * {@code G}'s prompt details from {@code C}'s: every key {@code C} states, {@code cached_tokens} set
   * to the clamped count; a key {@code G} lacks is added only when {@code C}'s value is not null and
   * members may be added, so a usage keeps its own shape and gains only counts it must carry.
   */
  private void setDetails(
      ContextUsage c, BigInteger cached, JsonObjectView g, Member gDetails, byte[] doc, boolean addMembers,
      ByteEdits edits) {
    Map<String, String> wanted = wantedDetails(c, cached);
    if (gDetails == null || gDetails.isNull()) {
      if (gDetails != null || addMembers) {
        String object = objectText(wanted);
        if (gDetails == null) {
          edits.insert(g.closingBrace(), "," + UsageRule.quote(promptDetails) + ":" + object);
        } else {
          edits.replace(gDetails.start(), gDetails.end(), object);
        }
      }
      return;
    }
    JsonObjectView view = gDetails.object();
    boolean needsComma = !view.isEmpty();
    for (Map.Entry<String, String> e : wanted.entrySet()) {
      Member m = view.get(e.getKey());
      if (m == null) {
        if (addMembers && !e.getValue().equals("null")) {
          edits.insert(view.closingBrace(), (needsComma ? "," : "") + UsageRule.quote(e.getKey()) + ":" + e.getValue());
          needsComma = true;
        }
      } else if (!sameValue(doc, m, e.getValue())) {
        edits.replace(m.start(), m.end(), e.getValue());
      }
    }
  }

  private static boolean possible(Count count) {
    return count == null || count.possible();
  }

  private static List<String> unstated(Set<String> listed, Set<String> stated) {
    List<String> out = new ArrayList<>(listed.size());
    for (String name : listed) {
      if (!stated.contains(name)) {
        out.add(name);
      }
    }
    return out;
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
        if (promptDetailCounts.contains(m.name()) && !m.isNull() && !m.isNonNegativeInteger()) {
          return Optional.empty(); // a count that cannot be true: nothing to correct with
        }
        if (m.name().equals(CACHED) && !m.isNull()) {
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

  /**
   * C's detail keys with C's values, {@code cached_tokens} set to the clamped count (first if new); a
   * new details object is written from it without C's null values.
   */
  private static Map<String, String> wantedDetails(ContextUsage c, BigInteger cached) {
    Map<String, String> wanted = new LinkedHashMap<>();
    if (!c.details().containsKey(CACHED)) {
      wanted.put(CACHED, cached.toString());
    }
    c.details().forEach((k, v) -> wanted.put(k, k.equals(CACHED) ? cached.toString() : v));
    return wanted;
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
          if (v.equals("null")) {
            return;
          }
          if (sb.length() > 1) {
            sb.append(',');
          }
          sb.append(UsageRule.quote(k)).append(':').append(v);
        });
    return sb.append('}').toString();
  }
}
