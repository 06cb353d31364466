package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.time.Duration;
import java.util.List;

/** The service replicas of a {@link Stack} in a fault test: their processes, readiness and logs. */
final class Replicas {
  private final Stack stack;
  private final List<Long> pids;

  /** Remembers each replica's process, so {@link #assertNoneRestarted()} can tell a restart. */
  Replicas(Stack stack) {
    this.stack = stack;
    this.pids = stack.services.stream().map(ServiceProcess::pid).toList();
  }

  /** Whether every replica's {@code /readyz} answers 200 now. */
  boolean allReady() {
    return stack.services.stream().allMatch(s -> Http.ok(s.adminUrl("/readyz")));
  }

  /** Whether every replica's {@code /readyz} answers 503 now: up, but not ready. */
  boolean allNotReady() {
    return stack.services.stream().allMatch(s -> Http.status(s.adminUrl("/readyz")) == 503);
  }

  void assertReady(String when) {
    Processes.await("both replicas ready " + when, Duration.ofSeconds(5), this::allReady);
  }

  void assertNoneRestarted() {
    for (int i = 0; i < pids.size(); i++) {
      ServiceProcess service = stack.services.get(i);
      assertThat(service.isAlive()).as("replica " + i + " alive").isTrue();
      assertThat(service.pid()).as("replica " + i + " never restarted").isEqualTo(pids.get(i));
    }
  }

  /** Each replica's log has a Redis store line naming {@code text}. */
  void assertLogged(String what, String text) {
    for (ServiceProcess service : stack.services) {
      String log;
      try {
        log = Files.readString(service.log());
      } catch (java.io.IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
      assertThat(log.lines().filter(l -> l.contains("Redis store") && l.contains(text)).findAny())
          .as(service.log().getFileName() + ": a line on " + what + " naming " + text).isPresent();
    }
  }
}
