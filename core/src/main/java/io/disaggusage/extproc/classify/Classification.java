package io.disaggusage.extproc.classify;

import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.usage.ContextUsage;
import java.util.List;
import java.util.EnumSet;
import java.util.Set;

/**
 * The decision for one exchange.
 *
 * @param phase context, generation, or none
 * @param keys correlation keys from the first source that has any, in lookup order
 * @param ordering how a generation exchange waits
 * @param carriedContext context usage carried in the generation request itself (TensorRT-LLM
 *     {@code ctx_usage} on a {@code generation_only} leg); no lookup is needed when present
 * @param refused the inputs that were not followed ({@link RefusedInput}); empty for an honest leg
 */
public record Classification(
    Phase phase,
    List<CorrelationKey> keys,
    Ordering ordering,
    ContextUsage carriedContext,
    Set<RefusedInput> refused) {

  public static final Classification NONE =
      new Classification(Phase.NONE, List.of(), Ordering.CONTEXT_FIRST, null, Set.of());

  public Classification {
    refused = Set.copyOf(refused);
  }

  /** This decision, with {@code more} refused inputs besides its own. */
  public Classification refusing(Set<RefusedInput> more) {
    if (more.isEmpty() || refused.containsAll(more)) {
      return this;
    }
    EnumSet<RefusedInput> all = EnumSet.noneOf(RefusedInput.class);
    all.addAll(refused);
    all.addAll(more);
    return new Classification(phase, keys, ordering, carriedContext, all);
  }
}
