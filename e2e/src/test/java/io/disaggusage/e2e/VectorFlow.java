package io.disaggusage.e2e;

import io.disaggusage.e2e.Orchestrator.Answer;
import io.disaggusage.extproc.testkit.ScenarioVectors.Leg;
import io.disaggusage.extproc.testkit.ScenarioVectors.Order;
import io.disaggusage.extproc.testkit.ScenarioVectors.Vector;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;

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
    serve(stack, stack, List.of(v));
    return send(stack, stack, v);
  }

  /**
   * Makes {@code contextSide}'s context worker and {@code generationSide}'s generation worker answer
   * each request with the leg of the vector whose request bytes it carries (several flows at once), or
   * of the only vector; a generation-first vector's context {@link #LATE_CONTEXT} late.
   */
  static void serve(Stack contextSide, Stack generationSide, List<Vector> vectors) {
    serve(contextSide.context, generationSide.generation, vectors);
  }

  /** {@link #serve(Stack, Stack, List)} by two workers, whoever routes to them. */
  static void serve(Worker context, Worker generation, List<Vector> vectors) {
    context.answer(request -> answer(vectors, request, true));
    generation.answer(request -> answer(vectors, request, false));
  }

  private static Worker.Reply answer(List<Vector> vectors, Worker.Received request, boolean context) {
    for (Vector v : vectors) {
      Leg leg = context ? v.context() : v.generation();
      if (leg != null && (vectors.size() == 1 || Arrays.equals(leg.requestBody(), request.body()))) {
        boolean late = context && v.order() == Order.GENERATION_FIRST;
        return reply(leg).delayedBy(late ? LATE_CONTEXT : Duration.ZERO);
      }
    }
    byte[] error = ("{\"error\":\"no flow sends these bytes\"}").getBytes(StandardCharsets.UTF_8);
    return new Worker.Reply(500, "application/json", List.of(error), Duration.ZERO, Duration.ZERO);
  }

  /**
   * Both legs of {@code v} in its order: the context through {@code contextSide}'s Envoy, the generation
   * through {@code generationSide}'s (one stack, or two Envoys in front of different replicas).
   */
  static Result send(Stack contextSide, Stack generationSide, Vector v) {
    return send(leg -> context(contextSide, v), leg -> generation(generationSide, v), v);
  }

  /** Both legs of {@code v} in its order, each sent by the given function (a proxy reached another way). */
  static Result send(Function<Leg, CompletableFuture<Answer>> contextSender,
      Function<Leg, CompletableFuture<Answer>> generationSender, Vector v) {
    return switch (v.order()) {
      case CONTEXT_FIRST -> {
        Answer context = contextSender.apply(v.context()).join();
        yield new Result(context, generationSender.apply(v.generation()).join());
      }
      case GENERATION_FIRST -> {
        CompletableFuture<Answer> context = contextSender.apply(v.context());
        CompletableFuture<Answer> generation = generationSender.apply(v.generation());
        yield new Result(context.join(), generation.join());
      }
      case CARRIED -> new Result(null, generationSender.apply(v.generation()).join());
    };
  }

  static CompletableFuture<Answer> context(Stack side, Vector v) {
    return send(side.envoy.contextUrl(v.context().path()), v.context());
  }

  static CompletableFuture<Answer> generation(Stack side, Vector v) {
    return send(side.envoy.generationUrl(v.generation().path()), v.generation());
  }

  static Worker.Reply reply(Leg leg) {
    return Worker.Reply.paced(leg.contentType(), leg.responseBody(), PIECES, PAUSE);
  }

  private static CompletableFuture<Answer> send(String url, Leg leg) {
    return Orchestrator.post(url, leg.requestHeaders(), leg.requestBody());
  }
}
