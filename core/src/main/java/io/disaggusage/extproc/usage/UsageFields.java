package io.disaggusage.extproc.usage;

import io.disaggusage.extproc.label.LowerCaseLabel;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * Every usage member the supported engines send, the leg its value comes from, and whether it is a
 * count: the table of behaviour.md "Every usage member by rule", as data. The principle: the client
 * sees what the same engine reports without disaggregation, so the prompt side comes from the context
 * (prefill) leg, the completion side from the generation (decode) leg, and totals are recomputed.
 * The rule of each {@link ApiShape} reads its members from here, and a test holds the documented
 * table to this list.
 */
public final class UsageFields {

  /** The leg a member's value comes from; the documented table shows its {@linkplain #label() label}. */
  public enum Leg implements LowerCaseLabel {
    /** The context (prefill) worker's value. */
    CONTEXT,
    /** The generation (decode) worker's value. */
    GENERATION,
    /** Computed from the other members. */
    COMPUTED
  }

  /**
   * One usage member of one API.
   *
   * @param api {@code chat} (chat/completions and completions), {@code responses} or {@code messages}
   * @param member the member's path in the usage object ({@code prompt_tokens_details.cached_tokens});
   *     {@code *} stands for any key not listed
   * @param from the leg its value comes from
   * @param count whether it is a token count (a JSON integer ≥ 0; the clamp applies); false for the
   *     unlisted keys, whose values are not judged
   */
  public record Field(String api, String member, Leg from, boolean count) {}

  public static final String CHAT = "chat";
  public static final String RESPONSES = "responses";
  public static final String MESSAGES = "messages";

  /** The prompt-side detail counts of chat/completions, all the context worker's. */
  static final List<String> PROMPT_DETAIL_COUNTS =
      List.of(
          "cached_tokens",
          "created_cache_tokens",
          "local_cached_tokens",
          "external_cached_tokens",
          "cache_write_tokens",
          "multimodal_tokens",
          "audio_tokens");

  /** The completion-side detail counts of chat/completions, all the generation worker's. */
  static final List<String> COMPLETION_DETAIL_COUNTS =
      List.of("reasoning_tokens", "audio_tokens", "accepted_prediction_tokens", "rejected_prediction_tokens");

  /** The prompt-side detail counts of the Responses API. */
  static final List<String> INPUT_DETAIL_COUNTS = List.of("cached_tokens", "cache_write_tokens");

  /** The completion-side detail counts of the Responses API. */
  static final List<String> OUTPUT_DETAIL_COUNTS = List.of("reasoning_tokens");

  /** Every row of the table, in its order. */
  public static final List<Field> ALL = table();

  private UsageFields() {}

  private static List<Field> table() {
    List<Field> rows = new java.util.ArrayList<>();
    openAi(rows, CHAT, "prompt_tokens", "completion_tokens", PROMPT_DETAIL_COUNTS, COMPLETION_DETAIL_COUNTS);
    openAi(rows, RESPONSES, "input_tokens", "output_tokens", INPUT_DETAIL_COUNTS, OUTPUT_DETAIL_COUNTS);
    rows.add(new Field(MESSAGES, "input_tokens", Leg.COMPUTED, true));
    rows.add(new Field(MESSAGES, MessagesShape.CACHE_READ, Leg.CONTEXT, true));
    rows.add(new Field(MESSAGES, MessagesShape.CACHE_CREATION, Leg.CONTEXT, true));
    rows.add(new Field(MESSAGES, "output_tokens", Leg.GENERATION, true));
    rows.add(new Field(MESSAGES, "*", Leg.GENERATION, false));
    return List.copyOf(rows);
  }

  private static void openAi(
      List<Field> rows, String api, String prompt, String completion, List<String> promptDetails, List<String> completionDetails) {
    rows.add(new Field(api, prompt, Leg.CONTEXT, true));
    for (String key : promptDetails) {
      rows.add(new Field(api, prompt + "_details." + key, Leg.CONTEXT, true));
    }
    rows.add(new Field(api, prompt + "_details.*", Leg.CONTEXT, false));
    rows.add(new Field(api, completion, Leg.GENERATION, true));
    for (String key : completionDetails) {
      rows.add(new Field(api, completion + "_details." + key, Leg.GENERATION, true));
    }
    rows.add(new Field(api, completion + "_details.*", Leg.GENERATION, false));
    rows.add(new Field(api, OpenAiShape.TOTAL, Leg.COMPUTED, true));
    rows.add(new Field(api, "*", Leg.GENERATION, false));
  }

  /** The listed count keys of one details object of one API ({@code prompt_tokens_details}, ...). */
  static Set<String> detailCounts(String api, String detailsMember) {
    String prefix = detailsMember + ".";
    return ALL.stream()
        .filter(f -> f.api().equals(api) && f.count() && f.member().startsWith(prefix))
        .map(f -> f.member().substring(prefix.length()))
        .collect(Collectors.toUnmodifiableSet());
  }
}
