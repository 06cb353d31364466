package io.disaggusage.extproc.metrics;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.Version;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.inject.InjectionOutcome;
import io.disaggusage.extproc.inject.UsageRemoval;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A scrape before the first exchange already has every series whose labels are known (at 0) and the
 * build's identity, so dashboards and absence alerts work from start-up.
 */
class MetricsAtStartTest {
  static String scrape(Metrics metrics) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    PrometheusTextFormatWriter.create().write(out, metrics.registry().scrape());
    return out.toString(StandardCharsets.UTF_8);
  }

  @Test
  void buildInfoNamesTheVersionAndTheJavaRuntime() throws IOException {
    assertThat(scrape(Metrics.standalone())).contains("disagg_usage_build_info{java_version=\"" + Runtime.version()
        + "\",version=\"" + Version.current() + "\"} 1\n");
  }

  @Test
  void everyPhaseAndOutcomeAndEveryEnumLabelIsThereAtZero() throws IOException {
    String text = scrape(Metrics.standalone());
    for (Phase phase : Phase.values()) {
      for (Outcome outcome : Outcome.values()) {
        assertThat(text).contains("disagg_usage_exchanges_total{outcome=\"" + outcome.label() + "\",phase=\""
            + phase.label() + "\"} 0.0");
      }
    }
    for (Metrics.StoreOperation operation : Metrics.StoreOperation.values()) {
      assertThat(text).contains("disagg_usage_store_errors_total{operation=\"" + operation.label + "\"} 0.0");
    }
    for (InjectionOutcome outcome : InjectionOutcome.values()) {
      assertThat(text).contains("disagg_usage_include_usage_injections_total{outcome=\"" + outcome.label() + "\"} 0.0");
    }
    for (UsageRemoval result : UsageRemoval.values()) {
      assertThat(text).contains("disagg_usage_injected_usage_events_total{result=\"" + result.label() + "\"} 0.0");
    }
    assertThat(text).as("no model seen, none allow-listed: no token series yet").doesNotContain("disagg_usage_tokens_total{");
  }

  @Test
  void allowListedModelsAndOtherHaveTheirTokenSeriesAtZero() throws IOException {
    Config.Metrics config = new Config.Metrics(List.of("llama-3-70b"), Config.defaults().metrics().maxModels(), Config.defaults().metrics().otlp());
    String text = scrape(new Metrics(new PrometheusRegistry(), config));
    for (String model : List.of("llama-3-70b", ModelLabels.OTHER)) {
      for (String kind : Metrics.TOKEN_KINDS) {
        assertThat(text).contains("disagg_usage_tokens_total{kind=\"" + kind + "\",model=\"" + model + "\"} 0.0");
      }
    }
  }
}
