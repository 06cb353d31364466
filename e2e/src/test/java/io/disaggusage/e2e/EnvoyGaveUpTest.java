package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.e2e.Orchestrator.Answer;
import io.disaggusage.e2e.VllmFlow.Outcome;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Real Envoy giving up on the service, and the service saying so. With Redis frozen (SIGSTOP) and
 * {@code store.redis_timeout} longer than the shipped 200 ms {@code message_timeout}, the generation
 * leg's response headers wait for their lookup longer than Envoy waits: Envoy passes the leg on
 * unprocessed (failure_mode_allow) and ends the ext_proc stream with a half-close and a reset, as a
 * client hang-up ends it. The service must count it {@code envoy_gave_up}, not {@code reset}, and the
 * client must still get every byte, uncorrected.
 *
 * <p>The context leg's reply waits for its store write just as long, but whether Envoy times it
 * depends on how the body's messages and the service's replies cross (a reply to an earlier chunk
 * stops Envoy's timer): Envoy 1.36.2 gave up on it in one run, 1.40.0 waited the whole second in
 * another. The service must count it {@code envoy_gave_up} exactly when Envoy's counter says so.
 */
class EnvoyGaveUpTest {
  /** Longer than Envoy's message timeout (0.2 s): the service waits for Redis longer than Envoy waits for it. */
  private static final String REDIS_TIMEOUT = "1s";

  @ParameterizedTest(name = "Envoy {0}")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void redisFrozenPastEnvoysMessageTimeoutCountsEnvoyGaveUp(String release) {
    try (RedisProcess redis = new RedisProcess("gave-up-redis-" + release).start();
        Stack stack = Stack.start("gave-up-" + release, release, 1,
            settings(redis.storeSettings(), "--set", "store.redis_timeout=" + REDIS_TIMEOUT,
                ServiceProcess.EXCHANGE_LINES[0], ServiceProcess.EXCHANGE_LINES[1]))) {
      VllmFlow flow = new VllmFlow(3, Duration.ofMillis(1)).install(stack);
      assertThat(flow.run(stack, "before")).isEqualTo(Outcome.CORRECTED);
      Map<String, Long> contextBefore = ServiceMetrics.exchanges(stack.service(), "context");
      Map<String, Long> generationBefore = ServiceMetrics.exchanges(stack.service(), "generation");
      EnvoyCounters before = EnvoyCounters.read(stack.envoy);

      long started = System.nanoTime();
      Answer answer;
      redis.freeze();
      try {
        answer = flow.runLegs(stack, "frozen"); // both legs: VllmFlow fails unless each answers 200
      } finally {
        redis.thaw(); // the lookup, and the write unless it timed out first, land on closed streams
      }
      long millis = (System.nanoTime() - started) / 1_000_000;

      assertThat(flow.judge(answer)).as("the worker's own bytes, every one").isEqualTo(Outcome.UNCHANGED);
      Map<String, Long> moved = before.movedTo(EnvoyCounters.read(stack.envoy));
      assertThat(moved.getOrDefault("generation_egress.message_timeouts", 0L)).as(moved.toString()).isEqualTo(1);
      long contextTimeouts = moved.getOrDefault("context_egress.message_timeouts", 0L);
      // The context exchange is counted when its write lands or fails, after the thaw.
      Processes.await("both exchanges counted", Duration.ofSeconds(10),
          () -> delta(stack, "context", contextBefore, null) == 1 && delta(stack, "generation", generationBefore, null) == 1);
      Map<String, Long> context = ServiceMetrics.exchanges(stack.service(), "context");
      Map<String, Long> generation = ServiceMetrics.exchanges(stack.service(), "generation");
      assertThat(delta(stack, "generation", generationBefore, "envoy_gave_up")).as("generation " + generation).isEqualTo(1);
      assertThat(delta(stack, "context", contextBefore, "envoy_gave_up"))
          .as("context %s, Envoy's counters moved %s", context, moved)
          .isEqualTo(contextTimeouts);
      System.out.printf("Envoy %s, Redis frozen for one flow (%d ms): Envoy counters moved %s; the service"
          + " counted context %s, generation %s%n", release, millis, moved, context, generation);

      Processes.await("a corrected flow after SIGCONT", Duration.ofSeconds(10),
          () -> flow.run(stack, "thawed-" + System.nanoTime()) == Outcome.CORRECTED);
    }
  }

  /** How many more exchanges of {@code phase} the service counted with {@code outcome} (null: any) than {@code before}. */
  private static long delta(Stack stack, String phase, Map<String, Long> before, String outcome) {
    Map<String, Long> now = ServiceMetrics.exchanges(stack.service(), phase);
    return outcome != null
        ? now.getOrDefault(outcome, 0L) - before.getOrDefault(outcome, 0L)
        : now.values().stream().mapToLong(Long::longValue).sum() - before.values().stream().mapToLong(Long::longValue).sum();
  }

  private static String[] settings(String[] store, String... more) {
    String[] all = java.util.Arrays.copyOf(store, store.length + more.length);
    System.arraycopy(more, 0, all, store.length, more.length);
    return all;
  }
}
