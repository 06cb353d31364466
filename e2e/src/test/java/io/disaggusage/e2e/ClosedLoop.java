package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.e2e.VllmFlow.Outcome;
import java.time.Duration;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Closed-loop clients running one flow after another through a stack, counting each flow's outcome per
 * phase of a fault test ("healthy", "redis killed", ...), so a test can assert what each phase cost. A
 * flow that started in one phase and ended in another is counted under "a -> b", in neither. Every
 * flow's start, end and outcome are kept, so a test can tell when flows were corrected again after a
 * fault ({@link #firstCorrectedAfter}).
 */
final class ClosedLoop implements AutoCloseable {
  /** One flow, run to its end through a stack under a request id of its own. */
  interface LoopFlow {
    Outcome run(Stack stack, String requestId);
  }

  /** A flow's times ({@link System#nanoTime()}) and outcome. */
  record Ran(long startNanos, long endNanos, Outcome outcome) {}

  private final Stack stack;
  private final LoopFlow flow;
  private final Map<String, Map<Outcome, AtomicInteger>> phases = new ConcurrentHashMap<>();
  private final Queue<Ran> timeline = new ConcurrentLinkedQueue<>();
  private final AtomicInteger ids = new AtomicInteger();
  private final CompletableFuture<?>[] clients;
  private volatile String phase = "start";
  private volatile boolean running = true;

  ClosedLoop(Stack stack, LoopFlow flow, int concurrency) {
    this.stack = stack;
    this.flow = flow;
    this.clients = new CompletableFuture<?>[concurrency];
    for (int i = 0; i < concurrency; i++) {
      clients[i] = CompletableFuture.runAsync(this::loop);
    }
  }

  /** Counts the flows that start from now on under {@code name}, for {@code millis}. */
  void phase(String name, long millis) {
    phase = name;
    Processes.sleepMillis(millis);
  }

  /** Every phase name counted so far, transitions ("a -> b") included. */
  java.util.Set<String> phases() {
    return new java.util.TreeSet<>(phases.keySet());
  }

  Map<Outcome, Integer> outcomes(String name) {
    Map<Outcome, Integer> counts = new EnumMap<>(Outcome.class);
    phases.getOrDefault(name, Map.of()).forEach((o, n) -> counts.put(o, n.get()));
    return counts;
  }

  int count(String name, Outcome outcome) {
    return outcomes(name).getOrDefault(outcome, 0);
  }

  /** Flows of {@code outcome} in every phase. */
  int total(Outcome outcome) {
    return (int) timeline.stream().filter(r -> r.outcome() == outcome).count();
  }

  /**
   * How long after {@code nanos} ({@link System#nanoTime()}) the first flow that started then or later
   * ended corrected: an upper bound of the time the service took to use its store again.
   */
  Optional<Duration> firstCorrectedAfter(long nanos) {
    return timeline.stream()
        .filter(r -> r.outcome() == Outcome.CORRECTED && r.startNanos() >= nanos)
        .map(r -> Duration.ofNanos(r.endNanos() - nanos))
        .min(Duration::compareTo);
  }

  /**
   * No flow broken or wrong in any phase; every flow of {@code firstHealthy} corrected, and at least 97 % of
   * each of {@code healthyAfterFaults}.
   */
  void assertEveryFlowRight(String firstHealthy, List<String> healthyAfterFaults) {
    assertThat(total(Outcome.WRONG)).as("flows with another flow's numbers; " + this).isZero();
    assertThat(total(Outcome.BROKEN)).as("flows with an error or lost bytes; " + this).isZero();
    assertThat(outcomes(firstHealthy)).as("every flow corrected while the store is healthy; " + this)
        .containsOnlyKeys(Outcome.CORRECTED);
    // As in RedisReplicasTest: right after a fault a saturated 2-core host may still miss the 50 ms
    // Redis budget for a few store calls; such flows pass through unchanged, never wrong.
    for (String healthy : healthyAfterFaults) {
      int flows = outcomes(healthy).values().stream().mapToInt(Integer::intValue).sum();
      assertThat(flows).as(healthy + ": flows ran").isPositive();
      assertThat(count(healthy, Outcome.CORRECTED)).as(healthy + ": at least 97 percent corrected; " + this)
          .isGreaterThanOrEqualTo(flows - flows * 3 / 100);
    }
  }

  private void loop() {
    while (running) {
      String at = phase;
      long start = System.nanoTime();
      Outcome outcome = flow.run(stack, at.replace(' ', '-') + "-" + ids.incrementAndGet());
      timeline.add(new Ran(start, System.nanoTime(), outcome));
      // A flow in flight when the fault struck belongs to neither phase.
      String counted = at.equals(phase) ? at : at + " -> " + phase;
      phases.computeIfAbsent(counted, p -> new ConcurrentHashMap<>()).computeIfAbsent(outcome, o -> new AtomicInteger()).incrementAndGet();
    }
  }

  @Override
  public void close() {
    running = false;
    CompletableFuture.allOf(clients).join();
  }

  @Override
  public String toString() {
    StringBuilder sb = new StringBuilder();
    phases.keySet().stream().sorted().forEach(p -> sb.append(p).append('=').append(outcomes(p)).append(' '));
    return sb.toString().trim();
  }
}
