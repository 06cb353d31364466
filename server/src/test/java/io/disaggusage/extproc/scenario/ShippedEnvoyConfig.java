package io.disaggusage.extproc.scenario;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import com.google.protobuf.util.JsonFormat;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;

/**
 * The ext_proc filter settings of the Envoy bootstrap the project ships ({@code deploy/envoy/envoy.yaml}),
 * so the scenario suite runs against exactly what users deploy: a change there that breaks correction
 * fails the build.
 */
public final class ShippedEnvoyConfig {
  static final String FILTER_NAME = "envoy.filters.http.ext_proc";
  private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());

  private ShippedEnvoyConfig() {}

  public static Path bootstrapFile() {
    String root = System.getProperty("project.root", "..");
    return Path.of(root).resolve("deploy/envoy/envoy.yaml").toAbsolutePath().normalize();
  }

  /** The ext_proc filter config of the shipped bootstrap, parsed strictly into Envoy's type. */
  public static ExternalProcessor extProcFilter() {
    try {
      JsonNode bootstrap = YAML.readTree(bootstrapFile().toFile());
      for (JsonNode listener : bootstrap.path("static_resources").path("listeners")) {
        for (JsonNode chain : listener.path("filter_chains")) {
          for (JsonNode filter : chain.path("filters")) {
            for (JsonNode http : filter.path("typed_config").path("http_filters")) {
              if (FILTER_NAME.equals(http.path("name").asText())) {
                ObjectNode config = http.path("typed_config").deepCopy();
                config.remove("@type");
                ExternalProcessor.Builder b = ExternalProcessor.newBuilder();
                JsonFormat.parser().merge(config.toString(), b);
                return b.build();
              }
            }
          }
        }
      }
      throw new IllegalStateException("no " + FILTER_NAME + " filter in " + bootstrapFile());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
