package io.disaggusage.extproc.emulator.envoy;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Optional;

/**
 * What the downstream client receives.
 *
 * @param status the {@code :status} the client saw (0 if the stream was reset before headers)
 * @param headers response headers after all mutations and content-length handling
 * @param body all body bytes received
 * @param chunks the body as Envoy injected it, one element per downstream data write
 * @param trailers response trailers (null if none)
 * @param complete whether the response ended normally (end of stream reached the client)
 * @param reset whether the downstream stream was reset (error after headers went out, or a
 *     downstream abort)
 * @param localReply set when Envoy generated the response itself
 */
public record ClientResponse(
    int status,
    HeaderList headers,
    byte[] body,
    List<byte[]> chunks,
    HeaderList trailers,
    boolean complete,
    boolean reset,
    Optional<LocalReply> localReply) {

  public String bodyUtf8() {
    return new String(body, StandardCharsets.UTF_8);
  }

  public Optional<String> header(String name) {
    return headers == null ? Optional.empty() : headers.get(name);
  }

  /** {@code %RESPONSE_CODE_DETAILS%} for local replies, {@code via_upstream} otherwise. */
  public String responseCodeDetails() {
    return localReply.map(LocalReply::details).orElse(reset ? "downstream_reset" : "via_upstream");
  }

  /**
   * HTTP/1 framing the downstream codec would use: chunked when no content-length is present.
   */
  public boolean chunkedFraming() {
    return headers != null && !headers.contains("content-length");
  }

  /**
   * True when the client got headers with a {@code content-length} that differs from the number of
   * body bytes it finally received: a real client would see a truncated or over-long response
   * (typically a STREAMED rewrite enabled via {@code mode_override} without removing the header).
   */
  public boolean contentLengthMismatch() {
    return headers != null && !reset && mismatch(headers, body.length);
  }

  static boolean mismatch(HeaderList headers, int actual) {
    Optional<String> cl = headers.get("content-length");
    if (cl.isEmpty()) {
      return false;
    }
    try {
      return Long.parseLong(cl.get().trim()) != actual;
    } catch (NumberFormatException e) {
      return true;
    }
  }
}
