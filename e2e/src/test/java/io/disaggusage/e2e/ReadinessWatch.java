package io.disaggusage.e2e;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Asks every service replica's {@code /readyz} every {@link #INTERVAL} on a thread of its own and keeps
 * each answer with its time, so a test can ask afterwards whether readiness followed the store: down
 * while a fault lasted, up again after it.
 */
final class ReadinessWatch implements AutoCloseable {
  private static final Duration INTERVAL = Duration.ofMillis(50);

  /** One answer: when, which replica, ready or not. */
  private record Sample(long nanos, int replica, boolean ready) {}

  private final List<String> urls;
  private final List<Sample> samples = new ArrayList<>();
  private final Thread thread;
  private volatile boolean running = true;

  ReadinessWatch(Stack stack) {
    this.urls = stack.services.stream().map(s -> s.adminUrl("/readyz")).toList();
    this.thread = new Thread(this::watch, "readiness-watch");
    thread.setDaemon(true);
    thread.start();
  }

  private void watch() {
    while (running) {
      for (int i = 0; i < urls.size(); i++) {
        boolean ready = Http.ok(urls.get(i));
        synchronized (samples) {
          samples.add(new Sample(System.nanoTime(), i, ready));
        }
      }
      Processes.sleepMillis(INTERVAL.toMillis());
    }
  }

  /** How long after {@code fromNanos} the replica first answered 503, if it did before {@code toNanos}. */
  Optional<Duration> firstNotReady(int replica, long fromNanos, long toNanos) {
    return first(replica, fromNanos, toNanos, false);
  }

  /** How long after {@code fromNanos} the replica first answered 200, if it did before {@code toNanos}. */
  Optional<Duration> firstReady(int replica, long fromNanos, long toNanos) {
    return first(replica, fromNanos, toNanos, true);
  }

  private Optional<Duration> first(int replica, long fromNanos, long toNanos, boolean ready) {
    synchronized (samples) {
      return samples.stream()
          .filter(s -> s.replica == replica && s.ready == ready && s.nanos >= fromNanos && s.nanos <= toNanos)
          .findFirst()
          .map(s -> Duration.ofNanos(s.nanos - fromNanos));
    }
  }

  int replicas() {
    return urls.size();
  }

  @Override
  public void close() {
    running = false;
    try {
      thread.join(Duration.ofSeconds(10).toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
