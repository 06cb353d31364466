package io.disaggusage.extproc.emulator.envoy;

import java.nio.charset.StandardCharsets;

/**
 * What the upstream received: the request headers after ext_proc mutations, the body bytes in the
 * order they were forwarded, trailers, and whether the request reached its end.
 *
 * @param reached whether the headers were forwarded at all (false after a local reply in the
 *     request header phase)
 * @param complete whether the end of the request was forwarded
 */
public record UpstreamRequest(
    boolean reached, HeaderList headers, byte[] body, HeaderList trailers, boolean complete) {

  public String bodyUtf8() {
    return new String(body, StandardCharsets.UTF_8);
  }

  /** True when a forwarded {@code content-length} disagrees with the bytes forwarded. */
  public boolean contentLengthMismatch() {
    return complete && ClientResponse.mismatch(headers, body.length);
  }
}
