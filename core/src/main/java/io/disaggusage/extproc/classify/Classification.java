package io.disaggusage.extproc.classify;

import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.usage.ContextUsage;
import java.util.List;

/**
 * The decision for one exchange.
 *
 * @param phase context, generation, or none
 * @param keys correlation keys from the first source that has any, in lookup order
 * @param ordering how a generation exchange waits
 * @param carriedContext context usage carried in the generation request itself (TensorRT-LLM
 *     {@code ctx_usage}); no lookup is needed when present
 */
public record Classification(
    Phase phase, List<CorrelationKey> keys, Ordering ordering, ContextUsage carriedContext) {

  public static final Classification NONE =
      new Classification(Phase.NONE, List.of(), Ordering.CONTEXT_FIRST, null);
}
