package io.disaggusage.e2e;

import io.disaggusage.e2e.Orchestrator.Answer;
import io.disaggusage.extproc.scenario.ScenarioVectors.Leg;
import io.disaggusage.extproc.scenario.ScenarioVectors.Order;
import io.disaggusage.extproc.scenario.ScenarioVectors.Vector;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;

/**
 * Runs one scenario vector through a {@link Stack} as its orchestrator would: context first, generation
 * first (the context worker answering {@link #LATE_CONTEXT} late), or the generation leg alone when it
 * carries the context usage. Workers write their bodies in paced chunks.
 */
final class VectorFlow {
  /** How late the context worker answers on a generation-first flow. */
  static final Duration LATE_CONTEXT = Duration.ofMillis(450);

  static final int PIECES = 4;
  static final Duration PAUSE = Duration.ofMillis(3);

  /** What the orchestrator got back from each leg; {@code context} is null when there was none. */
  record Result(Answer context, Answer generation) {}

  private VectorFlow() {}

  static Result run(Stack stack, Vector v) {
    Duration contextDelay = v.order() == Order.GENERATION_FIRST ? LATE_CONTEXT : Duration.ZERO;
    if (v.context() != null) {
      stack.context.answer(request -> reply(v.context()).delayedBy(contextDelay));
    }
    stack.generation.answer(request -> reply(v.generation()));
    return switch (v.order()) {
      case CONTEXT_FIRST -> {
        Answer context = send(stack.envoy.contextUrl(v.context().path()), v.context()).join();
        yield new Result(context, send(stack.envoy.generationUrl(v.generation().path()), v.generation()).join());
      }
      case GENERATION_FIRST -> {
        CompletableFuture<Answer> context = send(stack.envoy.contextUrl(v.context().path()), v.context());
        CompletableFuture<Answer> generation = send(stack.envoy.generationUrl(v.generation().path()), v.generation());
        yield new Result(context.join(), generation.join());
      }
      case CARRIED -> new Result(null, send(stack.envoy.generationUrl(v.generation().path()), v.generation()).join());
    };
  }

  static Worker.Reply reply(Leg leg) {
    return Worker.Reply.paced(leg.contentType(), leg.responseBody(), PIECES, PAUSE);
  }

  private static CompletableFuture<Answer> send(String url, Leg leg) {
    return Orchestrator.post(url, leg.requestHeaders(), leg.requestBody());
  }
}
