package io.disaggusage.extproc.stream;

import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import java.util.Locale;
import java.util.Map;

/**
 * What the response headers say about the body to come.
 *
 * @param success a 2xx status
 * @param identity no content-encoding (or {@code identity}): the body can be read
 * @param eventStream {@code text/event-stream}
 * @param announcedLength the content-length as the upstream announced it, or -1
 * @param endOfStream no body follows
 */
record ResponseHead(
    boolean success, boolean identity, boolean eventStream, long announcedLength, boolean endOfStream) {

  static ResponseHead of(HttpHeaders headers) {
    Map<String, String> map = EnvoyMessages.headers(headers.getHeaders());
    return new ResponseHead(
        is2xx(map.get(":status")),
        identity(map.get("content-encoding")),
        isEventStream(map.get("content-type")),
        contentLength(map.get("content-length")),
        headers.getEndOfStream());
  }

  /** Whether the body is one the service can read: a successful, unencoded body to come. */
  boolean readable() {
    return success && identity && !endOfStream;
  }

  private static boolean is2xx(String status) {
    return status != null && status.length() == 3 && status.charAt(0) == '2';
  }

  /** A content-length header's value, or -1 when there is none or it is not a plain number. */
  private static long contentLength(String value) {
    if (value == null) {
      return -1;
    }
    try {
      return Long.parseLong(value.trim());
    } catch (NumberFormatException e) {
      return -1;
    }
  }

  private static boolean identity(String contentEncoding) {
    return contentEncoding == null
        || contentEncoding.isBlank()
        || contentEncoding.trim().equalsIgnoreCase("identity");
  }

  private static boolean isEventStream(String contentType) {
    return contentType != null
        && contentType.toLowerCase(Locale.ROOT).startsWith("text/event-stream");
  }
}
