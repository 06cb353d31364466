package io.disaggusage.extproc.runtime;

import io.prometheus.metrics.instrumentation.jvm.JvmMetrics;
import io.prometheus.metrics.model.registry.PrometheusRegistry;

/**
 * Registers the Prometheus JVM collectors on a thread of its own, so that their set-up (MXBean lookups,
 * 60-130 ms of a cold JVM) runs beside the start-up warm-up instead of before it; {@link #await} before
 * {@code /metrics} opens, so a scrape never sees the service without them.
 */
final class JvmMetricsRegistration {
  private final Thread thread;
  private volatile RuntimeException failure;

  private JvmMetricsRegistration(PrometheusRegistry registry) {
    thread = new Thread(() -> {
      try {
        JvmMetrics.builder().register(registry);
      } catch (RuntimeException e) {
        failure = e;
      }
    }, "disagg-usage-jvm-metrics");
    thread.setDaemon(true);
  }

  static JvmMetricsRegistration start(PrometheusRegistry registry) {
    JvmMetricsRegistration registration = new JvmMetricsRegistration(registry);
    registration.thread.start();
    return registration;
  }

  /** Waits until the collectors are registered; rethrows what registering threw. */
  void await() {
    boolean interrupted = false;
    while (true) {
      try {
        thread.join();
        break;
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
    if (failure != null) {
      throw failure;
    }
  }
}
