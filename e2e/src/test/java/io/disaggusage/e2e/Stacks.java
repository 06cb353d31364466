package io.disaggusage.e2e;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * One {@link Stack} per Envoy release, started on first use and shared by a test class's flows. A stack
 * that failed to start fails every later flow of its release at once with the same cause, instead of
 * starting (and timing out) again per flow.
 */
final class Stacks implements AutoCloseable {
  private record Started(Stack stack, RuntimeException failure) {}

  private final String name;
  private final int replicas;
  private final String[] settings;
  private final Map<String, Started> byRelease = new ConcurrentHashMap<>();

  Stacks(String name, int replicas, String... settings) {
    this.name = name;
    this.replicas = replicas;
    this.settings = settings;
  }

  Stack get(String release) {
    Started started = byRelease.computeIfAbsent(release, r -> {
      try {
        return new Started(Stack.start(name + "-" + r, r, replicas, settings), null);
      } catch (RuntimeException | AssertionError e) {
        return new Started(null, new IllegalStateException("the " + name + " stack on Envoy " + r + " did not start", e));
      }
    });
    if (started.failure() != null) {
      throw started.failure();
    }
    return started.stack();
  }

  @Override
  public void close() {
    byRelease.values().forEach(s -> {
      if (s.stack() != null) {
        s.stack().close();
      }
    });
    byRelease.clear();
  }
}
