package io.disaggusage.deploy;

import com.google.protobuf.Duration;
import com.google.protobuf.util.Durations;
import io.envoyproxy.envoy.config.cluster.v3.Cluster;
import io.envoyproxy.envoy.config.cluster.v3.OutlierDetection;
import io.envoyproxy.envoy.config.core.v3.HealthCheck;
import java.util.ArrayList;
import java.util.List;

/**
 * How every shipped ext_proc cluster learns that a replica is up or gone (measured with Envoy 1.40,
 * docs/reliability.md): a gRPC health check that re-checks a failed host within a second or two, also
 * before the cluster's first stream (Envoy's default {@code no_traffic_interval} of 60 s kept a service
 * started after Envoy out that long), and outlier detection that stops choosing a replica after a few
 * failed connections, never ejecting more than half the hosts (so never a lone host, and never below
 * Envoy's 50 % panic threshold).
 */
final class ExtProcClusterHealth {
  /** The longest wait before a failed host is checked again. */
  static final long MAX_RECHECK_MILLIS = 2000;
  /** The first call into a just-started JVM took over a second on a loaded machine. */
  static final long MIN_TIMEOUT_MILLIS = 2000;
  static final int MAX_EJECTION_PERCENT = 50;
  static final int MAX_CONSECUTIVE_LOCAL_ORIGIN_FAILURES = 5;

  private ExtProcClusterHealth() {}

  /** Every way {@code cluster} departs from the rules; empty when it complies. */
  static List<String> violations(Cluster cluster) {
    List<String> v = new ArrayList<>();
    List<HealthCheck> grpc = cluster.getHealthChecksList().stream().filter(HealthCheck::hasGrpcHealthCheck).toList();
    if (grpc.size() != 1) {
      v.add("the processor cluster needs one gRPC health check, has " + grpc.size());
    } else {
      activeRules(grpc.get(0), v);
    }
    if (!cluster.hasOutlierDetection()) {
      v.add("outlier_detection must be set: without it a killed replica keeps its share of streams until health checks fail");
    } else {
      outlierRules(cluster.getOutlierDetection(), v);
    }
    return v;
  }

  private static void activeRules(HealthCheck check, List<String> v) {
    Duration unhealthy = check.hasUnhealthyInterval() ? check.getUnhealthyInterval() : check.getInterval();
    if (Durations.toMillis(unhealthy) > MAX_RECHECK_MILLIS) {
      v.add("health check unhealthy_interval (or interval) must be <= " + MAX_RECHECK_MILLIS + "ms");
    }
    if (!check.hasNoTrafficInterval() || Durations.toMillis(check.getNoTrafficInterval()) > MAX_RECHECK_MILLIS) {
      v.add("health check no_traffic_interval must be set, <= " + MAX_RECHECK_MILLIS + "ms (Envoy's default is 60 s)");
    }
    if (Durations.toMillis(check.getTimeout()) < MIN_TIMEOUT_MILLIS) {
      v.add("health check timeout must be >= " + MIN_TIMEOUT_MILLIS + "ms (a just-started JVM answers its first call slowly)");
    }
    if (check.getHealthyThreshold().getValue() != 1) {
      v.add("health check healthy_threshold must be 1 (a host is usable as soon as it answers SERVING)");
    }
  }

  private static void outlierRules(OutlierDetection outlier, List<String> v) {
    if (!outlier.getSplitExternalLocalOriginErrors()) {
      v.add("outlier_detection.split_external_local_origin_errors must be true (failed connections count on their own)");
    }
    if (!outlier.hasConsecutiveLocalOriginFailure()
        || outlier.getConsecutiveLocalOriginFailure().getValue() > MAX_CONSECUTIVE_LOCAL_ORIGIN_FAILURES) {
      v.add("outlier_detection.consecutive_local_origin_failure must be set, <= " + MAX_CONSECUTIVE_LOCAL_ORIGIN_FAILURES);
    }
    if (!outlier.hasMaxEjectionPercent() || outlier.getMaxEjectionPercent().getValue() > MAX_EJECTION_PERCENT) {
      v.add("outlier_detection.max_ejection_percent must be set, <= " + MAX_EJECTION_PERCENT + " (never eject a lone host)");
    }
    if (outlier.getAlwaysEjectOneHost().getValue()) {
      v.add("outlier_detection.always_eject_one_host would eject a lone host");
    }
  }
}
