package io.disaggusage.e2e;

import io.disaggusage.e2e.VllmFlow.Outcome;
import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Closed-loop clients running one flow after another through a stack, counting each flow's outcome per
 * phase of a fault test ("healthy", "redis killed", ...), so a test can assert what each phase cost. A
 * flow that started in one phase and ended in another is counted under "a -> b", in neither.
 */
final class ClosedLoop implements AutoCloseable {
  private final Stack stack;
  private final VllmFlow flow;
  private final Map<String, Map<Outcome, AtomicInteger>> phases = new ConcurrentHashMap<>();
  private final AtomicInteger ids = new AtomicInteger();
  private final CompletableFuture<?>[] clients;
  private volatile String phase = "start";
  private volatile boolean running = true;

  ClosedLoop(Stack stack, VllmFlow flow, int concurrency) {
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

  private void loop() {
    while (running) {
      String at = phase;
      Outcome outcome = flow.judge(flow.run(stack, at.replace(' ', '-') + "-" + ids.incrementAndGet()));
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
