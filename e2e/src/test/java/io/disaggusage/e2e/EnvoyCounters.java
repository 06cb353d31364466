package io.disaggusage.e2e;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Envoy's ext_proc counters on both listeners, read before and after a flow: the fail-open ones must not
 * move on a healthy service, and the stream ones show that the service was asked at all.
 */
record EnvoyCounters(Map<String, Long> values) {
  /** Counters that count a failure Envoy let through (failure_mode_allow) or a reply it discarded. */
  static final List<String> FAILURES = List.of(
      "failure_mode_allowed", "message_timeouts", "streams_failed", "spurious_msgs_received",
      "override_message_timeout_ignored", "clear_route_cache_ignored");

  static final List<String> LISTENERS = List.of("context_egress", "generation_egress");

  static EnvoyCounters read(EnvoyProcess envoy) {
    Map<String, Long> values = new LinkedHashMap<>();
    for (String listener : LISTENERS) {
      envoy.stats("http." + listener + ".ext_proc.")
          .forEach((name, value) -> values.put(name.substring("http.".length()).replace(".ext_proc", ""), value));
    }
    return new EnvoyCounters(values);
  }

  /** {@code after − this}, per counter that moved. */
  Map<String, Long> movedTo(EnvoyCounters after) {
    Map<String, Long> moved = new LinkedHashMap<>();
    after.values.forEach((name, value) -> {
      long delta = value - values.getOrDefault(name, 0L);
      if (delta != 0) {
        moved.put(name, delta);
      }
    });
    return moved;
  }

  /** The failure counters among {@code moved}. */
  static Map<String, Long> failures(Map<String, Long> moved) {
    Map<String, Long> failures = new LinkedHashMap<>();
    moved.forEach((name, delta) -> {
      if (FAILURES.contains(name.substring(name.indexOf('.') + 1))) {
        failures.put(name, delta);
      }
    });
    return failures;
  }
}
