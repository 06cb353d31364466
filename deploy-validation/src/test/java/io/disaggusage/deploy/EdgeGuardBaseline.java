package io.disaggusage.deploy;

import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import java.util.ArrayList;
import java.util.List;

/**
 * What every shipped ext_proc filter calling the edge guard must share with the filter of
 * deploy/envoy/edge-guard/envoy.yaml: its processing mode (request headers sent, the guard turns on the
 * streamed request bodies it checks, responses never sent), allow_mode_override, failure_mode_allow and
 * message_timeout; and it writes no metadata and asks for no attributes (the guard reads neither).
 */
final class EdgeGuardBaseline {
  private EdgeGuardBaseline() {}

  static ExternalProcessor shipped() {
    try {
      return EdgeGuardBootstrapTest.edgeFilter(EdgeGuardBootstrapTest.bootstrap());
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  /** Every way {@code filter} departs from the edge bootstrap's filter; empty when it complies. */
  static List<String> violations(ExternalProcessor filter) {
    ExternalProcessor shipped = shipped();
    List<String> v = new ArrayList<>();
    if (!filter.getProcessingMode().equals(shipped.getProcessingMode())) {
      v.add("processing_mode must be the edge bootstrap's " + shipped.getProcessingMode() + ", was " + filter.getProcessingMode());
    }
    if (filter.getAllowModeOverride() != shipped.getAllowModeOverride()) {
      v.add("allow_mode_override must be " + shipped.getAllowModeOverride() + " (the guard turns on streamed request bodies)");
    }
    if (filter.getFailureModeAllow() != shipped.getFailureModeAllow()) {
      v.add("failure_mode_allow must be " + shipped.getFailureModeAllow() + ", as the edge bootstrap's");
    }
    if (!filter.getMessageTimeout().equals(shipped.getMessageTimeout())) {
      v.add("message_timeout must be the edge bootstrap's " + shipped.getMessageTimeout().getSeconds() + "s");
    }
    if (filter.hasMetadataOptions() || filter.getRequestAttributesCount() > 0 || filter.getResponseAttributesCount() > 0) {
      v.add("the guard reads no attributes and writes no metadata");
    }
    if (filter.getObservabilityMode() || filter.getSendBodyWithoutWaitingForHeaderResponse() || filter.getDisableImmediateResponse()) {
      v.add("no observability_mode, send_body_without_waiting_for_header_response or disable_immediate_response"
          + " (the guard rewrites bodies and answers 400 itself)");
    }
    return v;
  }
}
