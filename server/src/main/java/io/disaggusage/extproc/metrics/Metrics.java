package io.disaggusage.extproc.metrics;

import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.Gauge;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.function.LongSupplier;

/**
 * The service's Prometheus metrics. Label values come only from enums, so cardinality is fixed.
 * The full metric set belongs to the observability issue; this is the core's minimum.
 */
public final class Metrics {
  private final PrometheusRegistry registry;
  private final Counter exchanges;
  private final Gauge activeStreams;
  private final Histogram contextWait;

  public Metrics(PrometheusRegistry registry) {
    this.registry = registry;
    this.exchanges =
        Counter.builder()
            .name("disagg_usage_exchanges_total")
            .help("HTTP exchanges seen through ext_proc, by phase and outcome")
            .labelNames("phase", "outcome")
            .register(registry);
    this.activeStreams =
        Gauge.builder()
            .name("disagg_usage_active_streams")
            .help("ext_proc streams currently open")
            .register(registry);
    this.contextWait =
        Histogram.builder()
            .name("disagg_usage_context_wait_seconds")
            .help("Time generation exchanges waited for their context usage")
            .classicUpperBounds(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10)
            .register(registry);
  }

  /** A fresh registry with this service's metrics only; for tests and embedded use. */
  public static Metrics standalone() {
    return new Metrics(new PrometheusRegistry());
  }

  public PrometheusRegistry registry() {
    return registry;
  }

  public void exchange(Phase phase, Outcome outcome) {
    exchanges.labelValues(phase.label(), outcome.label()).inc();
  }

  /** Current count for one (phase, outcome) pair; for tests and the admin page. */
  public long exchangeCount(Phase phase, Outcome outcome) {
    return (long) exchanges.labelValues(phase.label(), outcome.label()).get();
  }

  public void streamOpened() {
    activeStreams.inc();
  }

  public void streamClosed() {
    activeStreams.dec();
  }

  public long activeStreams() {
    return (long) activeStreams.get();
  }

  public void contextWaited(long nanos) {
    contextWait.observe(nanos / 1e9);
  }

  /** Exposes the store's size as {@code disagg_usage_store_entries}. */
  public void registerStoreSize(LongSupplier entries) {
    GaugeWithCallback.builder()
        .name("disagg_usage_store_entries")
        .help("Context usage entries currently held by the store")
        .callback(cb -> cb.call(entries.getAsLong()))
        .register(registry);
  }
}
