package io.disaggusage.extproc.driver;

import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.HeaderSendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.BodyMutation;

/** What Envoy's ext_proc filter makes of a processor's reply, for the parts every driver shares. */
public final class ReplyRules {
  private ReplyRules() {}

  /**
   * The bytes Envoy forwards in place of {@code original} under a body mutation: the mutation's
   * {@code body}, nothing for {@code clear_body: true}, else (including {@code clear_body: false}) the
   * original bytes.
   */
  public static byte[] mutatedBody(byte[] original, BodyMutation mutation) {
    return switch (mutation.getMutationCase()) {
      case BODY -> mutation.getBody().toByteArray();
      case CLEAR_BODY -> mutation.getClearBody() ? new byte[0] : original;
      default -> original;
    };
  }

  /**
   * The processing mode Envoy runs with after a {@code mode_override} on a headers reply: a header or
   * trailer mode left at {@code DEFAULT} keeps the configured one, the body modes are taken as sent.
   * Envoy merges with the filter's configured mode, not with an earlier override.
   */
  public static ProcessingMode overriddenMode(ProcessingMode configured, ProcessingMode override) {
    ProcessingMode.Builder merged = configured.toBuilder();
    if (override.getRequestHeaderMode() != HeaderSendMode.DEFAULT) {
      merged.setRequestHeaderMode(override.getRequestHeaderMode());
    }
    if (override.getResponseHeaderMode() != HeaderSendMode.DEFAULT) {
      merged.setResponseHeaderMode(override.getResponseHeaderMode());
    }
    if (override.getRequestTrailerMode() != HeaderSendMode.DEFAULT) {
      merged.setRequestTrailerMode(override.getRequestTrailerMode());
    }
    if (override.getResponseTrailerMode() != HeaderSendMode.DEFAULT) {
      merged.setResponseTrailerMode(override.getResponseTrailerMode());
    }
    return merged
        .setRequestBodyMode(override.getRequestBodyMode())
        .setResponseBodyMode(override.getResponseBodyMode())
        .build();
  }
}
