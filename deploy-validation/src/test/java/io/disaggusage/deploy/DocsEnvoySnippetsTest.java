package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Message;
import io.envoyproxy.envoy.config.cluster.v3.Cluster;
import io.envoyproxy.envoy.config.route.v3.RouteConfiguration;
import io.envoyproxy.envoy.config.route.v3.VirtualHost;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.envoyproxy.envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Envoy configuration shown in the documentation is parsed like shipped configuration: a fenced
 * {@code yaml} block whose first line is {@code # envoy: <proto type>} must parse strictly into that type.
 */
class DocsEnvoySnippetsTest {
  private static final Pattern BLOCK = Pattern.compile("```yaml\\n# envoy: ([\\w.]+)\\n(.*?)```", Pattern.DOTALL);
  private static final Map<String, Descriptor> TYPES =
      Map.of(
          "envoy.config.route.v3.VirtualHost", VirtualHost.getDescriptor(),
          "envoy.config.route.v3.RouteConfiguration", RouteConfiguration.getDescriptor(),
          "envoy.config.cluster.v3.Cluster", Cluster.getDescriptor(),
          "envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter", HttpFilter.getDescriptor(),
          "envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor", ExternalProcessor.getDescriptor());

  static Stream<Arguments> snippets() throws IOException {
    List<Path> docs = new ArrayList<>();
    docs.add(ProjectFiles.resolve("README.md"));
    try (Stream<Path> files = Files.walk(ProjectFiles.root())) {
      files
          .filter(p -> p.toString().endsWith(".md"))
          .filter(p -> !p.toString().contains("/target/") && !p.toString().contains("/."))
          .filter(p -> !p.equals(ProjectFiles.resolve("README.md")))
          .forEach(docs::add);
    }
    List<Arguments> out = new ArrayList<>();
    for (Path doc : docs) {
      Matcher m = BLOCK.matcher(Files.readString(doc));
      int n = 0;
      while (m.find()) {
        out.add(Arguments.of(ProjectFiles.relative(doc) + " #" + ++n, m.group(1), m.group(2)));
      }
    }
    assertThat(out).as("documented Envoy snippets").isNotEmpty();
    return out.stream();
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("snippets")
  void parsesStrictlyIntoItsType(String where, String type, String yaml) throws Exception {
    Descriptor descriptor = TYPES.get(type);
    assertThat(descriptor).as(where + ": unknown snippet type " + type).isNotNull();
    JsonNode node = YamlDocuments.YAML.readTree(yaml);
    Message parsed = EnvoyProtos.parse(node, descriptor);
    assertThat(EnvoyProtos.deprecatedFields(parsed)).as(where).isEmpty();
    if (descriptor == HttpFilter.getDescriptor()) {
      HttpFilter filter = HttpFilter.parseFrom(parsed.toByteString());
      if (filter.getTypedConfig().is(ExternalProcessor.class)) {
        assertThat(ExtProcBaseline.violations(filter.getTypedConfig().unpack(ExternalProcessor.class))).as(where).isEmpty();
      }
    }
  }
}
