package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.Wire;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.metrics.ModelLabels;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.prometheus.metrics.expositionformats.ExpositionFormats;
import java.io.ByteArrayOutputStream;
import org.junit.jupiter.api.Test;

/** The metrics that let operators see the correction: tokens by model and kind, latencies, errors. */
class MetricsScenarioTest {
  static final String PATH = "/v1/chat/completions";

  static void pair(ServiceUnderTest s, String id, String model, long prompt, long ctxCached, long genCached, long completion) {
    var results = Flows.contextFirst(
        s.envoy,
        Exchange.post(PATH, "{\"model\":\"" + model + "\",\"kv_transfer_params\":{\"do_remote_decode\":true}}")
            .requestHeader("x-request-id", id)
            .responseHeader("content-type", "application/json")
            .responseBody(Wire.chatCompletion(id, Wire.usage(prompt, 1, ctxCached))),
        Exchange.post(PATH, "{\"model\":\"" + model + "\",\"kv_transfer_params\":{\"do_remote_prefill\":true}}")
            .requestHeader("x-request-id", id)
            .responseHeader("content-type", "application/json")
            .responseBody(Wire.chatCompletion(id, Wire.usage(prompt, completion, genCached)).replace(Wire.MODEL, model))
            .responseChunking(Chunking.fixed(50)));
    Flows.assertClean(results[0]);
    Flows.assertClean(results[1]);
  }

  @Test
  void trueAndReportedHitRatiosAreOneDivisionEach() throws Exception {
    try (ServiceUnderTest s = new ServiceUnderTest(ServiceUnderTest.testConfig())) {
      pair(s, "a", "llama", 1000, 0, 1000, 10); // cache-busted: the worker says 100 % hit
      pair(s, "b", "llama", 1000, 900, 1000, 20); // a real prefix hit of 900
      Metrics m = s.metrics;
      assertThat(m.tokenCount("llama", "prompt")).isEqualTo(2000);
      assertThat(m.tokenCount("llama", "cached")).isEqualTo(900);
      assertThat(m.tokenCount("llama", "cached_reported")).isEqualTo(2000);
      assertThat(m.tokenCount("llama", "completion")).isEqualTo(30);
      double trueRatio = (double) m.tokenCount("llama", "cached") / m.tokenCount("llama", "prompt");
      double reportedRatio = (double) m.tokenCount("llama", "cached_reported") / m.tokenCount("llama", "prompt");
      assertThat(trueRatio).isEqualTo(0.45);
      assertThat(reportedRatio).isEqualTo(1.0);

      ByteArrayOutputStream text = new ByteArrayOutputStream();
      ExpositionFormats.init().getPrometheusTextFormatWriter().write(text, m.registry().scrape());
      assertThat(text.toString())
          .contains("disagg_usage_tokens_total{kind=\"cached\",model=\"llama\"} 900.0")
          .contains("disagg_usage_message_processing_seconds_count{message=\"response_body\"}")
          .contains("disagg_usage_message_processing_seconds_count{message=\"request_headers\"}")
          .contains("disagg_usage_active_streams");
    }
  }

  @Test
  void clientChosenModelNamesCannotExplodeCardinality() throws Exception {
    try (ServiceUnderTest s = new ServiceUnderTest(ServiceUnderTest.testConfig())) {
      for (int i = 0; i < 25; i++) {
        pair(s, "id" + i, "model-" + i, 10, 0, 10, 1);
      }
      ByteArrayOutputStream text = new ByteArrayOutputStream();
      ExpositionFormats.init().getPrometheusTextFormatWriter().write(text, s.metrics.registry().scrape());
      long series =
          text.toString().lines().filter(l -> l.startsWith("disagg_usage_tokens_total{") && l.contains("kind=\"prompt\"")).count();
      assertThat(series).isEqualTo(21); // the default 20 models plus "other"
      assertThat(s.metrics.tokenCount(ModelLabels.OTHER, "prompt")).isEqualTo(50);
    }
  }
}
