package io.disaggusage.extproc.emulator.envoy;

import com.google.protobuf.Struct;
import io.disaggusage.extproc.driver.ReplyRules;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.config.core.v3.Metadata;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * What the filter reads from its {@code ExternalProcessor} config and the fake Envoy's knobs
 * (Envoy's {@code FilterConfig}): processing mode and which mode overrides are allowed, timeouts,
 * failure_mode_allow, metadata namespaces, the gRPC service's metadata and authority. Kept apart so
 * the filter and its processor states ask one place what the configuration allows.
 */
final class FilterConfig {
  private final FakeEnvoy envoy;
  private final ExternalProcessor cfg;

  FilterConfig(FakeEnvoy envoy) {
    this.envoy = envoy;
    this.cfg = envoy.config();
  }

  ProcessingMode processingMode() {
    return cfg.getProcessingMode();
  }

  boolean failureModeAllow() {
    return cfg.getFailureModeAllow();
  }

  boolean disableImmediateResponse() {
    return cfg.getDisableImmediateResponse();
  }

  boolean sendBodyWithoutWaitingForHeaderResponse() {
    return cfg.getSendBodyWithoutWaitingForHeaderResponse();
  }

  int bufferLimitBytes() {
    return envoy.bufferLimitBytes();
  }

  boolean stripContentLengthOnModeOverride() {
    return envoy.stripContentLengthOnModeOverride();
  }

  long messageTimeoutMillis() {
    return envoy.messageTimeoutMillis();
  }

  long maxMessageTimeoutMillis() {
    return envoy.maxMessageTimeoutMillis();
  }

  /** The attribute expressions sent with the first message of a direction. */
  List<String> attributes(boolean isRequest) {
    return isRequest ? cfg.getRequestAttributesList() : cfg.getResponseAttributesList();
  }

  /**
   * The mode a reply's mode_override switches to (§2.4), or null when the override does not apply:
   * not allowed by config, not in allowed_override_modes, or no headers reply awaited.
   */
  ProcessingMode overriddenMode(ProcessingResponse r, boolean headersAwaited) {
    ProcessingMode configured = cfg.getProcessingMode();
    if (!r.hasModeOverride()
        || !cfg.getAllowModeOverride()
        || cfg.getSendBodyWithoutWaitingForHeaderResponse()
        || configured.getRequestBodyMode() == BodySendMode.FULL_DUPLEX_STREAMED
        || configured.getResponseBodyMode() == BodySendMode.FULL_DUPLEX_STREAMED
        || !headersAwaited) {
      return null;
    }
    ProcessingMode m = ReplyRules.overriddenMode(configured, r.getModeOverride());
    if (cfg.getAllowedOverrideModesCount() > 0) {
      boolean allowed = cfg.getAllowedOverrideModesList().stream().anyMatch(a ->
          m.getRequestBodyMode() == a.getRequestBodyMode()
              && m.getRequestTrailerMode() == a.getRequestTrailerMode()
              && m.getResponseHeaderMode() == a.getResponseHeaderMode()
              && m.getResponseBodyMode() == a.getResponseBodyMode()
              && m.getResponseTrailerMode() == a.getResponseTrailerMode());
      if (!allowed) {
        return null;
      }
    }
    if (m.getRequestBodyMode() == BodySendMode.FULL_DUPLEX_STREAMED
        || m.getResponseBodyMode() == BodySendMode.FULL_DUPLEX_STREAMED) {
      throw new UnsupportedOperationException(
          "FakeEnvoy does not model FULL_DUPLEX_STREAMED (requested via mode_override)");
    }
    return m;
  }

  /** The dynamic metadata of the forwarding namespaces, as sent in each message's metadata_context. */
  Metadata forwardingMetadata(Map<String, Struct> dynamicMetadata) {
    Metadata.Builder m = Metadata.newBuilder();
    if (cfg.hasMetadataOptions()) {
      for (String ns : cfg.getMetadataOptions().getForwardingNamespaces().getUntypedList()) {
        Struct s = dynamicMetadata.get(ns);
        if (s != null) {
          m.putFilterMetadata(ns, s);
        }
      }
    }
    return m.build();
  }

  /** Merges a reply's dynamic_metadata of the receiving namespaces into {@code dynamicMetadata}. */
  void receiveMetadata(ProcessingResponse r, Map<String, Struct> dynamicMetadata) {
    if (!r.hasDynamicMetadata() || !cfg.hasMetadataOptions()) {
      return;
    }
    List<String> receiving = cfg.getMetadataOptions().getReceivingNamespaces().getUntypedList();
    for (var e : r.getDynamicMetadata().getFieldsMap().entrySet()) {
      if (receiving.contains(e.getKey())) {
        Struct incoming = e.getValue().getStructValue();
        dynamicMetadata.merge(e.getKey(), incoming, (a, b) -> a.toBuilder().mergeFrom(b).build());
      }
    }
  }

  /** Whether a clear_route_cache with header mutations is refused by config. */
  boolean clearRouteCacheDisabled() {
    return cfg.getDisableClearRouteCache()
        || cfg.getRouteCacheAction() == ExternalProcessor.RouteCacheAction.RETAIN;
  }

  /** The gRPC service's initial_metadata, then the exchange's own entries, keys lower-cased. */
  io.grpc.Metadata initialMetadata(Map<String, String> exchangeMetadata) {
    io.grpc.Metadata md = new io.grpc.Metadata();
    Map<String, String> initial = new LinkedHashMap<>();
    if (cfg.hasGrpcService()) {
      for (HeaderValue hv : cfg.getGrpcService().getInitialMetadataList()) {
        initial.put(
            hv.getKey().toLowerCase(Locale.ROOT),
            hv.getRawValue().isEmpty() ? hv.getValue() : hv.getRawValue().toStringUtf8());
      }
    }
    exchangeMetadata.forEach((k, v) -> initial.put(k.toLowerCase(Locale.ROOT), v));
    initial.forEach(
        (k, v) -> md.put(io.grpc.Metadata.Key.of(k, io.grpc.Metadata.ASCII_STRING_MARSHALLER), v));
    return md;
  }

  /** The :authority of the ext_proc stream: the envoy_grpc authority or cluster name, else none. */
  String authority() {
    return cfg.hasGrpcService() && cfg.getGrpcService().hasEnvoyGrpc()
        ? (cfg.getGrpcService().getEnvoyGrpc().getAuthority().isEmpty()
            ? cfg.getGrpcService().getEnvoyGrpc().getClusterName()
            : cfg.getGrpcService().getEnvoyGrpc().getAuthority())
        : "";
  }
}
