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

  private static final Pattern REFUSED =
      Pattern.compile("(?m)^disagg_usage_refused_inputs_total\\{input=\"([^\"]*)\",phase=\"([^\"]*)\"\\} ([0-9.eE+]+)$");

  /** The request inputs the service refused, by {@code input} label over every phase; counts above 0 only. */
  static Map<String, Long> refusedInputs(ServiceProcess service) {
    Map<String, Long> byInput = new TreeMap<>();
    Matcher line = REFUSED.matcher(Http.body(service.adminUrl("/metrics")));
    while (line.find()) {
      long count = (long) Double.parseDouble(line.group(3));
      if (count > 0) {
        byInput.merge(line.group(1), count, Long::sum);
      }
    }
    return byInput;
  }

  /**
   * The outcomes that gave the client corrected usage: {@code rewritten}, and {@code impossible_count}
   * when the generation engine reported a count that cannot be true (SGLang's decode radix cache adding
   * its own hits to the prefill's can claim more cached tokens than the prompt has).
   */
  static final java.util.Set<String> CORRECTED = java.util.Set.of("rewritten", "impossible_count");

  /** The generation exchanges the service corrected ({@link #CORRECTED}). */
  static long correctedGenerations(ServiceProcess service) {
    return exchanges(service, "generation").entrySet().stream()
        .filter(e -> CORRECTED.contains(e.getKey())).mapToLong(Map.Entry::getValue).sum();
  }

  /** Every generation exchange so far was corrected: {@code count} of them, and no other outcome. */
  static void assertAllCorrected(ServiceProcess service, long count) {
    Map<String, Long> outcomes = exchanges(service, "generation");
    org.assertj.core.api.Assertions.assertThat(outcomes.keySet()).as("every generation exchange corrected: %s", outcomes)
        .isSubsetOf(CORRECTED);
    org.assertj.core.api.Assertions.assertThat(correctedGenerations(service)).as("%s", outcomes).isEqualTo(count);
  }

  static long generationExchanges(ServiceProcess service) {
    return exchanges(service, "generation").values().stream().mapToLong(Long::longValue).sum();
  }
}
