package io.disaggusage.extproc.driver;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.util.Durations;
import com.google.protobuf.util.JsonFormat;
import io.envoyproxy.envoy.config.core.v3.GrpcService;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.MetadataOptions;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.HeaderSendMode;
import java.time.Duration;
import java.util.Optional;

/**
 * The {@code envoy.filters.http.ext_proc} filter settings Envoy's side of a stream runs with (the
 * emulator's fake Envoy, {@link EnvoyStream}): the ones the project ships in
 * {@code deploy/envoy/envoy.yaml}, or an operator's own, read from YAML or JSON.
 */
public final class FilterConfigs {
  /** The HTTP filter name Envoy registers ext_proc under. */
  public static final String FILTER_NAME = "envoy.filters.http.ext_proc";

  /** Made on first {@link #parse}: the server's start-up warm-up reads {@link #shipped} only. */
  private static final class Yaml {
    static final ObjectMapper MAPPER = new ObjectMapper(new YAMLFactory());
  }

  private FilterConfigs() {}

  /**
   * The filter of {@code deploy/envoy/envoy.yaml} (behaviour.md §6 baseline), accepting dynamic metadata
   * in {@code namespace} (the shipped file names the default, {@code disagg_usage}).
   */
  public static ExternalProcessor shipped(String namespace) {
    return ExternalProcessor.newBuilder()
        .setGrpcService(
            GrpcService.newBuilder()
                .setEnvoyGrpc(
                    GrpcService.EnvoyGrpc.newBuilder()
                        .setClusterName("disagg_usage_extproc")
                        .setAuthority("localhost")))
        .setFailureModeAllow(true)
        .setAllowModeOverride(true)
        .setProcessingMode(shippedMode())
        .addRequestAttributes(EnvoyRequests.CLUSTER_NAME)
        .setMessageTimeout(Durations.fromMillis(200))
        .setMaxMessageTimeout(Durations.fromSeconds(3))
        .setMetadataOptions(
            MetadataOptions.newBuilder()
                .setReceivingNamespaces(
                    MetadataOptions.MetadataNamespaces.newBuilder().addUntyped(namespace)))
        .build();
  }

  /**
   * The shipped filter's processing mode: both headers, no body and no trailers until the service's
   * {@code mode_override} asks for more.
   */
  public static ProcessingMode shippedMode() {
    return ProcessingMode.newBuilder()
        .setRequestHeaderMode(HeaderSendMode.SEND)
        .setResponseHeaderMode(HeaderSendMode.SEND)
        .setRequestBodyMode(BodySendMode.NONE)
        .setResponseBodyMode(BodySendMode.NONE)
        .setRequestTrailerMode(HeaderSendMode.SKIP)
        .setResponseTrailerMode(HeaderSendMode.SKIP)
        .build();
  }

  /** The same settings with another {@code message_timeout}. */
  public static ExternalProcessor withMessageTimeout(ExternalProcessor config, Duration timeout) {
    return config.toBuilder().setMessageTimeout(Durations.fromMillis(timeout.toMillis())).build();
  }

  /**
   * Reads the ext_proc filter settings from YAML or JSON text: an Envoy bootstrap or any part of one
   * (the first {@value #FILTER_NAME} HTTP filter found is used), one {@code http_filters} entry, or the
   * filter's {@code typed_config} itself. Fields are checked strictly against Envoy's proto.
   *
   * @throws IllegalArgumentException saying what is wrong, when the text is not YAML/JSON, holds no
   *     ext_proc filter, or the filter settings do not match the proto
   */
  public static ExternalProcessor parse(String text) {
    JsonNode root;
    try {
      root = Yaml.MAPPER.readTree(text);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException("not YAML or JSON: " + e.getOriginalMessage(), e);
    }
    if (root == null || !root.isObject()) {
      throw new IllegalArgumentException("expected a YAML/JSON object");
    }
    JsonNode typedConfig =
        isFilterConfig(root)
            ? root
            : findFilter(root)
                .orElseThrow(() -> new IllegalArgumentException("no " + FILTER_NAME + " filter with a typed_config"));
    ObjectNode config = typedConfig.deepCopy();
    config.remove("@type");
    ExternalProcessor.Builder b = ExternalProcessor.newBuilder();
    try {
      JsonFormat.parser().merge(config.toString(), b);
    } catch (InvalidProtocolBufferException e) {
      throw new IllegalArgumentException(FILTER_NAME + " typed_config: " + e.getMessage(), e);
    }
    return b.build();
  }

  /** The filter's own settings: typed as ExternalProcessor, or carrying its processing_mode. */
  private static boolean isFilterConfig(JsonNode node) {
    return node.path("@type").asText().endsWith(".ext_proc.v3.ExternalProcessor")
        || node.has("processing_mode") && !node.has("typed_config");
  }

  /** Depth-first, in document order: the typed_config of the first ext_proc HTTP filter. */
  private static Optional<JsonNode> findFilter(JsonNode node) {
    if (node.isObject()
        && FILTER_NAME.equals(node.path("name").asText())
        && node.path("typed_config").isObject()) {
      return Optional.of(node.get("typed_config"));
    }
    for (JsonNode child : node) {
      Optional<JsonNode> found = findFilter(child);
      if (found.isPresent()) {
        return found;
      }
    }
    return Optional.empty();
  }
}
