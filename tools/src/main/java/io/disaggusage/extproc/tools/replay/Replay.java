package io.disaggusage.extproc.tools.replay;

import io.disaggusage.extproc.emulator.engines.ScheduleOrder;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.DisaggFlows;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.emulator.envoy.FakeEnvoy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/** Runs captured legs through a fake Envoy, in the orchestrator's order, as Envoy would see them. */
public final class Replay {
  private Replay() {}

  /**
   * How the legs are replayed.
   *
   * @param chunkSize bytes per response body chunk; 0 for one chunk per event of an event stream and
   *     the whole body of anything else
   * @param chunkDelay pause before each response chunk
   */
  public record Options(ScheduleOrder order, int chunkSize, Duration chunkDelay) {}

  /**
   * What happened.
   *
   * @param context null when there was no context leg
   */
  public record Result(ExchangeResult context, ExchangeResult generation) {
    /** What went wrong in either exchange, as the client or the operator would see it. */
    public List<String> problems() {
      List<String> problems = new ArrayList<>();
      Optional.ofNullable(context).ifPresent(c -> c.problems().forEach(p -> problems.add("context exchange: " + p)));
      generation.problems().forEach(p -> problems.add("generation exchange: " + p));
      return problems;
    }
  }

  public static Result run(FakeEnvoy envoy, ReplayInput input, Options options) {
    Exchange.Builder gen = exchange("generation", input.generation(), options);
    if (input.context() == null) {
      return new Result(null, DisaggFlows.run(envoy, gen));
    }
    Exchange.Builder ctx = exchange("context", input.context(), options);
    ExchangeResult[] r =
        options.order() == ScheduleOrder.GENERATION_FIRST
            ? DisaggFlows.generationFirst(envoy, ctx, gen)
            : DisaggFlows.contextFirst(envoy, ctx, gen);
    return new Result(r[0], r[1]);
  }

  private static Exchange.Builder exchange(String name, ReplayLeg leg, Options options) {
    Chunking chunking =
        options.chunkSize() > 0
            ? Chunking.fixed(options.chunkSize())
            : leg.eventStream() ? Chunking.sseEvents() : Chunking.whole();
    return leg.exchange(name, chunking, options.chunkDelay());
  }
}
