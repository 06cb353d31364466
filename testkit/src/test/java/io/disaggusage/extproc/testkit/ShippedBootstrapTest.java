package io.disaggusage.extproc.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.driver.FilterConfigs;
import io.disaggusage.extproc.testkit.ShippedBootstrap.Topology;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The shipped bootstrap without its ext_proc filter: the bench's "Envoy, no ext_proc" differs in nothing else. */
class ShippedBootstrapTest {
  private static final Topology TOPOLOGY = new Topology(1, 2, 3, List.of(4), List.of(5), List.of(6));

  @Test
  void withoutExtProcDropsTheFilterFromBothListenersAndNothingElse() {
    ObjectNode shipped = ShippedBootstrap.rewrite(ShippedEnvoyConfig.bootstrapFile(), TOPOLOGY);
    ObjectNode bare = ShippedBootstrap.withoutExtProc(shipped);

    assertThat(httpFilters(shipped)).containsExactly(
        FilterConfigs.FILTER_NAME, "envoy.filters.http.router", FilterConfigs.FILTER_NAME, "envoy.filters.http.router");
    assertThat(httpFilters(bare)).containsExactly("envoy.filters.http.router", "envoy.filters.http.router");
    // put the filters back where they were: the rest of the tree is the same
    for (String listener : List.of("context_egress", "generation_egress")) {
      JsonNode filter = managerOf(shipped, listener).path("http_filters").get(0);
      ((ArrayNode) managerOf(bare, listener).path("http_filters")).insert(0, filter);
    }
    assertThat(bare).isEqualTo(shipped);
  }

  @Test
  void withExtProcLatenciesAppendsEnvoysSpansAndCallLatenciesToEveryAccessLogLineAndChangesNothingElse() {
    ObjectNode shipped = ShippedBootstrap.rewrite(ShippedEnvoyConfig.bootstrapFile(), TOPOLOGY);
    ObjectNode logged = ShippedBootstrap.withExtProcLatencies(shipped);

    for (String listener : List.of("context_egress", "generation_egress")) {
      ObjectNode format = (ObjectNode) managerOf(logged, listener).at("/access_log/0/typed_config/log_format/text_format_source");
      String line = format.path("inline_string").asText();
      String before = managerOf(shipped, listener).at("/access_log/0/typed_config/log_format/text_format_source/inline_string").asText();
      assertThat(line).startsWith(before.substring(0, before.length() - 1)).endsWith(
          " xp_response_body_total_latency_us=%FILTER_STATE(envoy.filters.http.ext_proc:FIELD:response_body_total_latency_us)%\n");
      assertThat(line).contains(" t_envoy_us=%COMMON_DURATION(DS_RX_BEG:DS_TX_END:us)%"
          + " t_upstream_us=%COMMON_DURATION(US_TX_BEG:US_RX_END:us)% xp_");
      for (String field : ShippedBootstrap.EXT_PROC_LATENCIES) {
        assertThat(line).contains(" xp_" + field + "=%FILTER_STATE(envoy.filters.http.ext_proc:FIELD:" + field + ")%");
      }
      format.put("inline_string", before);
    }
    assertThat(logged).isEqualTo(shipped);
  }

  private static List<String> httpFilters(JsonNode bootstrap) {
    List<String> names = new ArrayList<>();
    for (String listener : List.of("context_egress", "generation_egress")) {
      managerOf(bootstrap, listener).path("http_filters").forEach(f -> names.add(f.path("name").asText()));
    }
    return names;
  }

  private static JsonNode managerOf(JsonNode bootstrap, String listener) {
    return ShippedBootstrap.named(bootstrap.path("static_resources"), "listeners", listener)
        .path("filter_chains").get(0).path("filters").get(0).path("typed_config");
  }
}
