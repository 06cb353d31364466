package io.disaggusage.deploy;

import com.google.protobuf.util.Durations;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.HeaderSendMode;
import java.util.ArrayList;
import java.util.List;

/**
 * The filter baseline every shipped ext_proc config must follow (the service's behaviour contract §6):
 * headers sent, bodies off (the service turns them on per exchange), trailers skipped, mode overrides
 * allowed, fail open, the cluster-name attribute, a message-timeout ceiling above the service's context
 * wait, and the service's metadata namespace accepted.
 */
final class ExtProcBaseline {
  /** The service's default metadata namespace. */
  static final String NAMESPACE = "disagg_usage";
  /** The service's default context wait (2 s) plus the 1 s margin the docs ask for. */
  static final long MIN_MAX_MESSAGE_TIMEOUT_MILLIS = 3000;

  private ExtProcBaseline() {}

  /** Every way {@code filter} departs from the baseline; empty when it complies. */
  static List<String> violations(ExternalProcessor filter) {
    List<String> v = new ArrayList<>();
    ProcessingMode mode = filter.getProcessingMode();
    if (mode.getRequestHeaderMode() == HeaderSendMode.SKIP) {
      v.add("processing_mode.request_header_mode must send headers");
    }
    if (mode.getResponseHeaderMode() == HeaderSendMode.SKIP) {
      v.add("processing_mode.response_header_mode must send headers");
    }
    if (mode.getRequestBodyMode() != BodySendMode.NONE) {
      v.add("processing_mode.request_body_mode must be NONE (the service streams bodies by mode_override)");
    }
    if (mode.getResponseBodyMode() != BodySendMode.NONE) {
      v.add("processing_mode.response_body_mode must be NONE (the service streams bodies by mode_override)");
    }
    if (mode.getRequestTrailerMode() == HeaderSendMode.SEND) {
      v.add("processing_mode.request_trailer_mode must be SKIP");
    }
    if (mode.getResponseTrailerMode() == HeaderSendMode.SEND) {
      v.add("processing_mode.response_trailer_mode must be SKIP");
    }
    if (!filter.getAllowModeOverride()) {
      v.add("allow_mode_override must be true");
    }
    if (!filter.getFailureModeAllow()) {
      v.add("failure_mode_allow must be true (usage accounting must never take LLM traffic down)");
    }
    if (!filter.getRequestAttributesList().contains("xds.cluster_name")) {
      v.add("request_attributes must include xds.cluster_name");
    }
    if (Durations.toMillis(filter.getMaxMessageTimeout()) < MIN_MAX_MESSAGE_TIMEOUT_MILLIS) {
      v.add("max_message_timeout must be >= " + MIN_MAX_MESSAGE_TIMEOUT_MILLIS + "ms (context wait + margin)");
    }
    if (filter.hasMessageTimeout() && Durations.toMillis(filter.getMessageTimeout()) <= 0) {
      v.add("message_timeout must be positive");
    }
    if (!filter.getMetadataOptions().getReceivingNamespaces().getUntypedList().contains(NAMESPACE)) {
      v.add("metadata_options.receiving_namespaces.untyped must include " + NAMESPACE);
    }
    if (filter.getObservabilityMode()) {
      v.add("observability_mode must be off (the service rewrites bodies)");
    }
    if (filter.getSendBodyWithoutWaitingForHeaderResponse()) {
      v.add("send_body_without_waiting_for_header_response disables mode_override");
    }
    if (filter.getDisableImmediateResponse()) {
      v.add("disable_immediate_response is not needed");
    }
    if (!filter.hasGrpcService()) {
      v.add("grpc_service must be set (the HTTP transport cannot carry bodies)");
    } else if (filter.getGrpcService().hasEnvoyGrpc()) {
      var envoyGrpc = filter.getGrpcService().getEnvoyGrpc();
      if (envoyGrpc.getClusterName().contains("|") && envoyGrpc.getAuthority().isEmpty()) {
        v.add("grpc_service.envoy_grpc.authority must be set when the cluster name contains '|'");
      }
    }
    return v;
  }
}
