package io.disaggusage.extproc.metrics;

import io.disaggusage.extproc.edge.Rejection;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.Locale;

/**
 * The edge guard's metrics ({@code edge_guard.enabled}), registered beside the service's own on one
 * registry: requests by outcome, what was removed, and why bodies were refused. Label values are
 * bounded: outcomes and reasons are enums, header names are the configured ones plus {@code x-disagg-*}
 * for any other of that family, member paths are the configured ones.
 */
public final class EdgeGuardMetrics {
  /** What became of one request. */
  public enum Outcome {
    /** Nothing to remove: forwarded as it came. */
    CLEAN,
    /** Headers or body members removed, the rest forwarded as it came. */
    STRIPPED,
    /** The body was not one JSON object: answered 400, not forwarded. */
    REJECTED;

    final String label = name().toLowerCase(Locale.ROOT);
  }

  private final Counter requests;
  private final Counter removedHeaders;
  private final Counter removedMembers;
  private final Counter rejections;

  public EdgeGuardMetrics(PrometheusRegistry registry) {
    this.requests =
        Counter.builder()
            .name("disagg_usage_edge_requests_total")
            .help("Client requests seen by the edge guard, by outcome: clean, stripped, rejected")
            .labelNames("outcome")
            .register(registry);
    this.removedHeaders =
        Counter.builder()
            .name("disagg_usage_edge_removed_headers_total")
            .help("Request headers the edge guard removed, by name (x-disagg-* for names of that family not listed)")
            .labelNames("header")
            .register(registry);
    this.removedMembers =
        Counter.builder()
            .name("disagg_usage_edge_removed_members_total")
            .help("JSON request body members the edge guard removed, by configured path")
            .labelNames("path")
            .register(registry);
    this.rejections =
        Counter.builder()
            .name("disagg_usage_edge_rejected_bodies_total")
            .help(
                "Request bodies the edge guard answered 400 to, by reason: malformed, truncated, not_an_object,"
                    + " too_deep, too_large")
            .labelNames("reason")
            .register(registry);
    for (Outcome outcome : Outcome.values()) {
      requests.labelValues(outcome.label); // every outcome shows, at 0 until it happens
    }
    for (Rejection reason : Rejection.values()) {
      rejections.labelValues(reason.label());
    }
  }

  public void request(Outcome outcome) {
    requests.labelValues(outcome.label).inc();
  }

  public void removedHeader(String label) {
    removedHeaders.labelValues(label).inc();
  }

  public void removedMembers(String path, int count) {
    removedMembers.labelValues(path).inc(count);
  }

  public void rejected(Rejection reason) {
    rejections.labelValues(reason.label()).inc();
  }

  public long requestCount(Outcome outcome) {
    return (long) requests.labelValues(outcome.label).get();
  }

  public long removedHeaderCount(String label) {
    return (long) removedHeaders.labelValues(label).get();
  }

  public long removedMemberCount(String path) {
    return (long) removedMembers.labelValues(path).get();
  }

  public long rejectedCount(Rejection reason) {
    return (long) rejections.labelValues(reason.label()).get();
  }
}
