package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.disaggusage.e2e.VllmFlow.Outcome;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/**
 * The OTLP export (metrics.otlp.*) received by a real OpenTelemetry Collector (v0.165.0, built from the
 * Go module proxy by scripts/install-test-tools): a vLLM P/D flow through a real Envoy, corrected, and
 * what the collector wrote — {@code gen_ai.client.token.usage} by {@code gen_ai.token.type} with the
 * corrected cached count, the worker's own under {@code disagg_usage.reported_cached_input}, the model
 * and the outcome; the exchanges by phase and outcome; the service's resource.
 */
class OtlpCollectorTest {

  @Test
  void theCollectorReceivesTheCorrectedTokenUsageUnderTheGenAiNames() {
    String release = Tools.envoyReleases().get(0);
    try (OtelCollector collector = OtelCollector.started("otelcol");
        Stack stack = Stack.start("otlp-" + release, release, 1, "--set", "metrics.otlp.endpoint=" + collector.endpoint(),
            "--set", "metrics.otlp.interval=1s")) {
      VllmFlow flow = new VllmFlow(3, Duration.ofMillis(1)).install(stack);
      assertThat(flow.run(stack, "otlp-1")).isEqualTo(Outcome.CORRECTED);

      Map<String, Double> sums = new TreeMap<>();
      Processes.await("a push with the flow's token usage", Duration.ofSeconds(15), () -> {
        sums.clear();
        sums.putAll(tokenSums(collector.pushes()));
        return sums.containsKey("cached_input");
      });
      assertThat(sums).as("gen_ai.client.token.usage sums by gen_ai.token.type").containsExactlyInAnyOrderEntriesOf(Map.of(
          "input", (double) VllmWorkers.PROMPT,
          "cached_input", (double) VllmWorkers.CACHED,
          "output", 3.0,
          "disagg_usage.reported_cached_input", (double) VllmWorkers.PROMPT));

      JsonNode last = collector.pushes().get(collector.pushes().size() - 1).path("resourceMetrics").get(0);
      assertThat(attributes(last.path("resource").path("attributes")))
          .containsEntry("service.name", "disagg-usage-extproc").containsKey("service.instance.id");
      JsonNode usage = metric(last, "gen_ai.client.token.usage");
      assertThat(usage.path("unit").asText()).isEqualTo("{token}");
      for (JsonNode point : usage.path("histogram").path("dataPoints")) {
        assertThat(attributes(point.path("attributes"))).containsEntry("gen_ai.request.model", io.disaggusage.extproc.testkit.Wire.MODEL)
            .containsEntry("disagg_usage.outcome", "rewritten");
      }
      Map<String, Long> exchanges = new TreeMap<>();
      for (JsonNode point : metric(last, "disagg_usage.exchanges").path("sum").path("dataPoints")) {
        Map<String, String> a = attributes(point.path("attributes"));
        exchanges.put(a.get("disagg_usage.phase") + "/" + a.get("disagg_usage.outcome"), point.path("asInt").asLong());
      }
      assertThat(exchanges).containsEntry("context/stored", 1L).containsEntry("generation/rewritten", 1L);
      System.out.printf("collector received %d pushes; token sums %s; exchanges %s%n", collector.pushes().size(), sums,
          exchanges);
    }
  }

  /** The newest push's {@code gen_ai.client.token.usage} sums by token type (cumulative: the newest has all). */
  private static Map<String, Double> tokenSums(List<JsonNode> pushes) {
    Map<String, Double> sums = new TreeMap<>();
    for (JsonNode push : pushes) {
      for (JsonNode resource : push.path("resourceMetrics")) {
        JsonNode usage = metric(resource, "gen_ai.client.token.usage");
        for (JsonNode point : usage.path("histogram").path("dataPoints")) {
          sums.put(attributes(point.path("attributes")).get("gen_ai.token.type"), point.path("sum").asDouble());
        }
      }
    }
    return sums;
  }

  private static JsonNode metric(JsonNode resourceMetrics, String name) {
    for (JsonNode scope : resourceMetrics.path("scopeMetrics")) {
      for (JsonNode metric : scope.path("metrics")) {
        if (metric.path("name").asText().equals(name)) {
          return metric;
        }
      }
    }
    return com.fasterxml.jackson.databind.node.MissingNode.getInstance();
  }

  private static Map<String, String> attributes(JsonNode list) {
    Map<String, String> out = new TreeMap<>();
    list.forEach(kv -> out.put(kv.path("key").asText(), kv.path("value").path("stringValue").asText()));
    return out;
  }
}
