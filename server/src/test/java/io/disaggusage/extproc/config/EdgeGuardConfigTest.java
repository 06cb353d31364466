package io.disaggusage.extproc.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.Test;

/** {@code edge_guard.*}: the defaults, and values that stop the start naming the key. */
class EdgeGuardConfigTest {

  @Test
  void theDefaultRoleIsTheUsageCorrection() {
    Config.EdgeGuard edge = Config.defaults().edgeGuard();
    assertThat(edge.enabled()).isFalse();
    assertThat(edge.removeHeaders()).containsExactly("epp-profile", "x-trtllm-msgpack", "x-prefiller-host-port");
    assertThat(edge.removeMembers())
        .containsExactly(
            "kv_transfer_params", "disaggregated_params", "bootstrap_host", "bootstrap_port", "bootstrap_room",
            "vllm_xargs.kv_transfer_params", "sampling_params.extra_args.kv_transfer_params");
    assertThat(edge.maxStringBytes()).isEqualTo(16 << 20);
  }

  @Test
  void theEnvironmentTurnsTheRoleOn() throws Exception {
    Config config =
        ConfigLoader.load(
            null,
            Map.of(
                "DISAGG_USAGE_EDGE_GUARD_ENABLED", "true",
                "DISAGG_USAGE_EDGE_GUARD_REMOVE_HEADERS", "x-a,x-b",
                "DISAGG_USAGE_EDGE_GUARD_MAX_STRING_BYTES", "64MiB"));
    assertThat(config.edgeGuard().enabled()).isTrue();
    assertThat(config.edgeGuard().removeHeaders()).containsExactly("x-a", "x-b");
    assertThat(config.edgeGuard().maxStringBytes()).isEqualTo(64 << 20);
  }

  @ParameterizedTest
  @CsvSource(
      delimiter = '|',
      value = {
        "edge_guard.remove_headers|X-Forged|must be lower case",
        "edge_guard.remove_headers|x forged|is not a header name",
        "edge_guard.remove_headers|:path|is not a header name",
        "edge_guard.remove_headers|host|cannot be removed",
        "edge_guard.remove_members|a..b|an empty member name",
        "edge_guard.remove_members|vllm_xargs,vllm_xargs.kv_transfer_params|removed whole",
        "edge_guard.max_string_bytes|0|must be positive",
        "edge_guard.enabled|yes|true or false",
      })
  void badValuesStopTheStartNamingTheKey(String key, String value, String message) {
    assertThatThrownBy(
            () -> ConfigLoader.load(null, Map.of(), List.of(new ConfigLoader.Setting(key, value, "--set"))))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining(key)
        .hasMessageContaining(message);
  }
}
