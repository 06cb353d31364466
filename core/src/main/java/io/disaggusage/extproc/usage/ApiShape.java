package io.disaggusage.extproc.usage;

import io.disaggusage.extproc.json.JsonObjectView;
import java.util.Optional;
import java.util.Set;

/**
 * One API's usage conventions, in one place: which request paths speak it, where its responses carry
 * the usage object, the names of that object's members, the rewrite rule of behaviour.md §2 as it
 * applies to them, and whether its streaming requests may be made to ask for usage
 * ({@code streaming.inject_include_usage}). {@link ApiShapes} holds every shape and chooses among them.
 * Implementations are stateless singletons.
 */
public interface ApiShape {

  /** Whether requests to {@code path} (never null) speak this shape. */
  boolean serves(String path);

  /**
   * Members of a response's root object whose object value may hold the usage object too (the root's
   * own {@code usage} always counts); empty when the usage is only ever at the root.
   */
  Set<String> usageContainers();

  /** Members of a usage object that are objects the rule reads member by member. */
  Set<String> usageDetailObjects();

  /** The member of a usage object that states the prompt count (usable or not). */
  String promptMember();

  /** Whether a context worker's usage object with these member names is of this shape. */
  boolean recognises(Set<String> usageMembers);

  /**
   * Reads {@code C} from a context worker's usage object of this shape laid out in {@code doc}; empty
   * when it is unusable (counts missing or not non-negative integers, details of the wrong type).
   */
  Optional<ContextUsage> context(JsonObjectView usage, byte[] doc);

  /**
   * Applies the §2 rule to {@code g}, the generation worker's usage object as laid out in {@code doc}.
   * With {@code c} null (no context usage) only counts that cannot be true change, to their clamped
   * values, and the total with them. {@code addMembers}: members {@code g} lacks may be added; false
   * for the running usage of an SSE event that also carries content, whose shape stays as it is (the
   * stream's usage-only event carries the counts).
   */
  UsageRule.Result apply(ContextUsage c, JsonObjectView g, byte[] doc, boolean addMembers);

  /** The figures a usage object states about itself (null members where it states nothing usable). */
  UsageFigures figuresOf(JsonObjectView usage);

  /**
   * Whether a streaming request of this shape may be edited to ask for usage: false when its stream
   * reports usage unasked.
   */
  boolean injectsIncludeUsage();
}
