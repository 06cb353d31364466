package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.e2e.VllmFlow.Outcome;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every restart, rollout and scale-up starts a cold JVM: the very first flow after {@code /readyz} must be
 * corrected, each leg answered inside Envoy's 200 ms message timeout. The jar is started fresh
 * {@link #STARTS} times behind one real Envoy, and the first context+generation pair goes out the moment
 * {@code /readyz} answers 200. Prints each start's leg latencies as the orchestrator saw them.
 */
class ColdStartTest {
  static final int STARTS = 5;


  @ParameterizedTest(name = "Envoy {0}")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void firstFlowAfterEveryFreshStartIsCorrected(String release) {
    try (Stack stack = Stack.startEnvoyFirst("coldstart-" + release, release, 1)) {
      VllmFlow flow = new VllmFlow(3, Duration.ofMillis(1)).install(stack);
      List<String> timings = new ArrayList<>();
      for (int start = 1; start <= STARTS; start++) {
        ServiceProcess service = stack.service();
        long launched = System.nanoTime();
        service.start();
        service.awaitReady(Duration.ofSeconds(30));
        long ready = System.nanoTime();
        EnvoyCounters before = EnvoyCounters.read(stack.envoy);

        long t0 = System.nanoTime();
        assertThat(VllmFlow.prefill(stack, "cold-" + start).status()).isEqualTo(200);
        long t1 = System.nanoTime();
        Outcome outcome = flow.judge(VllmFlow.decode(stack, "cold-" + start));
        long t2 = System.nanoTime();

        Map<String, Long> moved = before.movedTo(EnvoyCounters.read(stack.envoy));
        timings.add(String.format("start %d: ready after %d ms, context leg %d ms, generation leg %d ms, %s",
            start, (ready - launched) / 1_000_000, (t1 - t0) / 1_000_000, (t2 - t1) / 1_000_000, outcome));
        assertThat(outcome).as("first flow after fresh start %d; %s; Envoy counters moved %s", start, timings, moved)
            .isEqualTo(Outcome.CORRECTED);
        assertThat(EnvoyCounters.failures(moved)).as("start %d: %s", start, moved).isEmpty();
        service.close();
      }
      System.out.printf("Envoy %s, cold starts:%n  %s%n", release, String.join("\n  ", timings));
    }
  }
}
