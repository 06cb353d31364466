package io.disaggusage.extproc.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.protobuf.util.Durations;
import io.disaggusage.extproc.driver.FilterConfigs;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The filter settings the demo and replay run with, and reading an operator's own. */
class FilterConfigsTest {

  @Test
  void shippedSettingsAreExactlyThoseOfDeployEnvoyYaml() {
    assertThat(FilterConfigs.shipped("disagg_usage")).isEqualTo(ShippedEnvoyConfig.extProcFilter());
  }

  @Test
  void shippedSettingsReceiveTheGivenNamespace() {
    assertThat(FilterConfigs.shipped("billing").getMetadataOptions().getReceivingNamespaces().getUntypedList())
        .containsExactly("billing");
  }

  @Test
  void readsTheFilterFromAnHttpFiltersEntryOrItsTypedConfig() {
    String typedConfig =
        """
        "@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor
        failure_mode_allow: true
        processing_mode: {request_header_mode: SEND, response_header_mode: SKIP}
        message_timeout: 0.5s
        """;
    ExternalProcessor direct = FilterConfigs.parse(typedConfig);
    assertThat(direct.getFailureModeAllow()).isTrue();
    assertThat(Durations.toMillis(direct.getMessageTimeout())).isEqualTo(500);
    String entry =
        "http_filters:\n- name: envoy.filters.http.ext_proc\n  typed_config:\n"
            + typedConfig.indent(4);
    assertThat(FilterConfigs.parse(entry)).isEqualTo(direct);
    assertThat(FilterConfigs.parse("{\"processing_mode\": {\"request_body_mode\": \"STREAMED\"}}")
            .getProcessingMode().getRequestBodyMode())
        .hasToString("STREAMED");
  }

  @Test
  void messageTimeoutOverride() {
    ExternalProcessor longer = FilterConfigs.withMessageTimeout(FilterConfigs.shipped("ns"), Duration.ofSeconds(1));
    assertThat(Durations.toMillis(longer.getMessageTimeout())).isEqualTo(1000);
    assertThat(longer.getMaxMessageTimeout()).isEqualTo(FilterConfigs.shipped("ns").getMaxMessageTimeout());
  }

  @Test
  void saysWhatIsWrong() {
    assertThatThrownBy(() -> FilterConfigs.parse("static_resources: {listeners: []}"))
        .hasMessageContaining("no envoy.filters.http.ext_proc filter");
    assertThatThrownBy(() -> FilterConfigs.parse("processing_mode: {request_body_mode: SOMETIMES}"))
        .hasMessageContaining("typed_config")
        .hasMessageContaining("SOMETIMES");
    assertThatThrownBy(() -> FilterConfigs.parse("{ not yaml: [")).hasMessageContaining("not YAML or JSON");
    assertThatThrownBy(() -> FilterConfigs.parse("- a list")).hasMessageContaining("expected a YAML/JSON object");
  }
}
