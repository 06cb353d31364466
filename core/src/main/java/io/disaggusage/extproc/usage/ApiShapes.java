package io.disaggusage.extproc.usage;

import io.disaggusage.extproc.json.JsonObjectView.Member;
import io.disaggusage.extproc.json.JsonObjectView;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * Every {@link ApiShape} the service knows, and the choice among them: by request path for a
 * generation response, by the members of the usage object for a context response (whose shape may
 * differ from the request's: an Anthropic front end may sit before OpenAI-speaking workers). A new
 * shape is one class and one entry in {@link #ALL}.
 */
public final class ApiShapes {
  /** Chat/completions and legacy completions: the shape of every path no other shape serves. */
  public static final ApiShape CHAT = new ChatCompletionsShape();
  /** The OpenAI Responses API. */
  public static final ApiShape RESPONSES = new ResponsesShape();
  /** The Anthropic Messages API. */
  public static final ApiShape MESSAGES = new MessagesShape();

  /** In order of precedence: the first that serves a path, or recognises a usage object, is chosen. */
  private static final List<ApiShape> ALL = List.of(CHAT, MESSAGES, RESPONSES);
  /** The shape when none serves or recognises: OpenAI's original one. */
  private static final ApiShape DEFAULT = CHAT;

  private static final Set<String> USAGE_CONTAINERS = union(ApiShape::usageContainers);
  private static final Set<String> USAGE_DETAIL_OBJECTS = union(ApiShape::usageDetailObjects);
  private static final Set<String> PROMPT_MEMBERS = union(shape -> Set.of(shape.promptMember()));

  private ApiShapes() {}

  /** The shape a request path speaks; the default for a null path or one no shape serves. */
  public static ApiShape forPath(String path) {
    if (path == null) {
      return DEFAULT;
    }
    for (ApiShape shape : ALL) {
      if (shape.serves(path)) {
        return shape;
      }
    }
    return DEFAULT;
  }

  /** The shape of a context worker's usage object with these member names. */
  public static ApiShape forContextUsage(Set<String> usageMembers) {
    for (ApiShape shape : ALL) { // once per context usage event: no stream pipeline
      if (shape.recognises(usageMembers)) {
        return shape;
      }
    }
    return DEFAULT;
  }

  /**
   * Reads {@code C} from a context worker's usage object of any shape laid out in {@code doc}; empty
   * when it is unusable.
   */
  public static Optional<ContextUsage> context(JsonObjectView usage, byte[] doc) {
    return forContextUsage(usage.members().keySet()).context(usage, doc);
  }

  /** Whether a usage object states a prompt count at all (a non-null prompt member of any shape). */
  public static boolean statesPrompt(JsonObjectView usage) {
    for (String name : PROMPT_MEMBERS) {
      Member m = usage.get(name);
      if (m != null && !m.isNull()) {
        return true;
      }
    }
    return false;
  }

  /** Root members that may hold the usage object in any shape ({@link ApiShape#usageContainers}). */
  public static Set<String> usageContainers() {
    return USAGE_CONTAINERS;
  }

  /** Usage members read as objects in any shape ({@link ApiShape#usageDetailObjects}). */
  public static Set<String> usageDetailObjects() {
    return USAGE_DETAIL_OBJECTS;
  }

  private static Set<String> union(java.util.function.Function<ApiShape, Set<String>> part) {
    Set<String> all = new LinkedHashSet<>();
    ALL.forEach(shape -> all.addAll(part.apply(shape)));
    return Set.copyOf(all);
  }
}
