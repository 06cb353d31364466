package io.disaggusage.extproc.metrics;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** The dashboard and the documented queries name only metrics the service exports. */
class ObservabilityDocsTest {
  private static final Pattern METRIC = Pattern.compile("\\bdisagg_usage_[a-z_]+");

  static Path root() {
    return Path.of(System.getProperty("project.root", "..")).toAbsolutePath().normalize();
  }

  /** Names a scrape can contain, in either role: each metric plus the series suffixes of its type. */
  static Set<String> exported() {
    Metrics metrics = Metrics.standalone();
    metrics.registerStoreSize(() -> 0);
    metrics.registerStoreReady(() -> true);
    new EdgeGuardMetrics(metrics.registry());
    Set<String> names = new HashSet<>();
    for (MetricSnapshot s : metrics.registry().scrape()) {
      String name = s.getMetadata().getPrometheusName();
      names.add(name);
      names.add(name + "_total");
      names.add(name + "_bucket");
      names.add(name + "_count");
      names.add(name + "_sum");
      names.add(name + "_info"); // an info metric is exposed with the suffix
    }
    return names;
  }

  static Set<String> referenced(String text) {
    Set<String> out = new HashSet<>();
    Matcher m = METRIC.matcher(text);
    while (m.find()) {
      out.add(m.group());
    }
    return out;
  }

  @Test
  void dashboardQueriesUseExportedMetrics() throws Exception {
    JsonNode dashboard = new ObjectMapper().readTree(root().resolve("docs/grafana-dashboard.json").toFile());
    Set<String> used = new HashSet<>();
    for (JsonNode panel : dashboard.path("panels")) {
      assertThat(panel.path("targets").size()).as(panel.path("title").asText()).isPositive();
      for (JsonNode target : panel.path("targets")) {
        used.addAll(referenced(target.path("expr").asText()));
      }
    }
    used.addAll(referenced(dashboard.path("templating").toString()));
    assertThat(used).isNotEmpty();
    assertThat(exported()).containsAll(used);
  }

  @Test
  void documentedQueriesUseExportedMetrics() throws Exception {
    String doc = Files.readString(root().resolve("docs/observability.md"));
    Set<String> used = referenced(doc);
    assertThat(used).contains("disagg_usage_tokens_total", "disagg_usage_exchanges_total");
    assertThat(exported()).containsAll(used);
  }
}
