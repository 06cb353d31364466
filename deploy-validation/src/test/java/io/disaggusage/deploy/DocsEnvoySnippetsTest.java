package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.google.protobuf.Message;
import io.envoyproxy.envoy.config.cluster.v3.Cluster;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.envoyproxy.envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Envoy configuration shown in the documentation is parsed like shipped configuration: every yaml
 * block {@link DocSnippets} recognises as Envoy configuration parses strictly into its kind's proto
 * (real Envoy judges the same blocks in {@link RealEnvoyValidateTest}).
 */
class DocsEnvoySnippetsTest {

  static List<DocSnippets.EnvoySnippet> snippets() {
    List<DocSnippets.EnvoySnippet> snippets = DocSnippets.envoySnippets();
    assertThat(snippets).as("documented Envoy snippets").isNotEmpty();
    return snippets;
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("snippets")
  void parsesStrictlyIntoItsType(DocSnippets.EnvoySnippet snippet) throws Exception {
    for (JsonNode item : snippet.items()) {
      Message parsed = EnvoyProtos.parse(item, snippet.kind().type);
      assertThat(EnvoyProtos.deprecatedFields(parsed)).as(snippet.where()).isEmpty();
      if (snippet.kind() == EnvoySnippetKind.CLUSTER && item.has("health_checks")) {
        // a documented cluster that shows health checking shows the shipped settings
        assertThat(ExtProcClusterHealth.violations(Cluster.parseFrom(parsed.toByteString()))).as(snippet.where()).isEmpty();
      }
      if (snippet.kind() == EnvoySnippetKind.HTTP_FILTER) {
        HttpFilter filter = HttpFilter.parseFrom(parsed.toByteString());
        if (filter.getTypedConfig().is(ExternalProcessor.class)) {
          assertThat(ExtProcBaseline.violations(filter.getTypedConfig().unpack(ExternalProcessor.class)))
              .as(snippet.where()).isEmpty();
        }
      }
    }
  }

  @Test
  void blocksAreRecognisedByMarkerOrShapeAndEnvoyLookingLeftoversFail() {
    assertThat(DocSnippets.recognise("w", "# envoy: envoy.config.cluster.v3.Cluster\nname: x\n"))
        .hasValueSatisfying(s -> assertThat(s.kind()).isEqualTo(EnvoySnippetKind.CLUSTER));
    assertThat(DocSnippets.recognise("w", "- name: x\n  type: STATIC\n- name: y\n  connect_timeout: 1s\n"))
        .hasValueSatisfying(s -> assertThat(s.items()).hasSize(2));
    assertThat(DocSnippets.recognise("w", "name: v\ndomains: ['*']\n"))
        .hasValueSatisfying(s -> assertThat(s.kind()).isEqualTo(EnvoySnippetKind.VIRTUAL_HOST));
    assertThat(DocSnippets.recognise("w", "name: f\ntyped_config: {'@type': type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}\n"))
        .hasValueSatisfying(s -> assertThat(s.kind()).isEqualTo(EnvoySnippetKind.HTTP_FILTER));
    assertThat(DocSnippets.recognise("w", "apiVersion: v1\nkind: EnvoyFilter\nspec: {}\n")).isEmpty();
    assertThat(DocSnippets.recognise("w", "grpc:\n  port: 9002\n")).isEmpty();
    assertThatThrownBy(() -> DocSnippets.recognise("w", "typed_config:\n  '@type': type.googleapis.com/envoy.x\n"))
        .hasMessageContaining("no recognised kind");
  }
}
