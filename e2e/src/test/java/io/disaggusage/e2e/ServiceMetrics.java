package io.disaggusage.e2e;

import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** The service's {@code disagg_usage_exchanges_total} counters, scraped from its Prometheus endpoint. */
final class ServiceMetrics {
  private static final Pattern EXCHANGES =
      Pattern.compile("(?m)^disagg_usage_exchanges_total\\{([^}]*)\\} ([0-9.eE+]+)$");
  private static final Pattern LABEL = Pattern.compile("(\\w+)=\"([^\"]*)\"");

  private ServiceMetrics() {}

  /**
   * The exchanges of {@code phase} by outcome label, e.g. {@code rewritten -> 3}: the outcomes that
   * happened (the service exports every series from start-up, at 0; those are left out).
   */
  static Map<String, Long> exchanges(ServiceProcess service, String phase) {
    Map<String, Long> byOutcome = new TreeMap<>();
    Matcher line = EXCHANGES.matcher(Http.body(service.adminUrl("/metrics")));
    while (line.find()) {
      Map<String, String> labels = new TreeMap<>();
      Matcher label = LABEL.matcher(line.group(1));
      while (label.find()) {
        labels.put(label.group(1), label.group(2));
      }
      long count = (long) Double.parseDouble(line.group(2));
      if (phase.equals(labels.get("phase")) && count > 0) {
        byOutcome.merge(labels.get("outcome"), count, Long::sum);
      }
    }
    return byOutcome;
  }

  /**
   * How many Envoy messages of one kind ({@code request_headers}, {@code request_body},
   * {@code response_headers}, {@code response_body}) the service has handled: its processing histogram's count.
   */
  static long messages(ServiceProcess service, String message) {
    String series = "disagg_usage_message_processing_seconds_count{message=\"" + message + "\"}";
    for (String line : Http.body(service.adminUrl("/metrics")).split("\n")) {
      if (line.startsWith(series + " ")) {
        return (long) Double.parseDouble(line.substring(series.length() + 1).trim());
      }
    }
    return 0;
  }

  /** Every generation exchange counted, whatever its outcome. */
  static long generationExchanges(ServiceProcess service) {
    return exchanges(service, "generation").values().stream().mapToLong(Long::longValue).sum();
  }
}
