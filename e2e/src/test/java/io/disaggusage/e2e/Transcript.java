package io.disaggusage.e2e;

import com.google.protobuf.ByteString;
import com.google.protobuf.Struct;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * One ext_proc stream reduced to what must not depend on who plays Envoy: per phase, the headers (minus
 * those a real proxy adds on its own), the attributes, the body bytes joined (how a body is cut into
 * messages depends on TCP reads, not on the filter) and whether it ended; and the service's answers,
 * with consecutive body replies joined the same way.
 */
final class Transcript {
  /** Headers a real Envoy or HTTP client adds or sets by itself; not part of the filter's contract. */
  static final Set<String> PROXY_HEADERS = Set.of(
      ":authority", "x-forwarded-proto", "x-request-id", "user-agent", "content-length", "transfer-encoding",
      "date", "server", "x-envoy-expected-rq-timeout-ms", "x-envoy-upstream-service-time", "connection", "upgrade",
      "http2-settings");

  private Transcript() {}

  static List<String> of(RecordingProxy.Recorded stream) {
    List<String> lines = new ArrayList<>();
    StringBuilder body = null;
    String bodyKind = null;
    for (ProcessingRequest request : stream.requests()) {
      String kind = request.getRequestCase().name().toLowerCase(Locale.ROOT);
      if (request.hasRequestBody() || request.hasResponseBody()) {
        var b = request.hasRequestBody() ? request.getRequestBody() : request.getResponseBody();
        if (!kind.equals(bodyKind)) {
          flush(lines, bodyKind, body);
          body = new StringBuilder();
          bodyKind = kind;
        }
        body.append(b.getBody().toStringUtf8());
        if (b.getEndOfStream()) {
          body.append("<end_of_stream>");
        }
        continue;
      }
      flush(lines, bodyKind, body);
      bodyKind = null;
      body = null;
      if (request.hasRequestHeaders() || request.hasResponseHeaders()) {
        var h = request.hasRequestHeaders() ? request.getRequestHeaders() : request.getResponseHeaders();
        lines.add(kind + " " + headers(h.getHeaders()) + (h.getEndOfStream() ? " end_of_stream" : "")
            + attributes(request.getAttributesMap()));
      } else {
        lines.add(kind);
      }
    }
    flush(lines, bodyKind, body);
    // Body replies answer body messages in order (FIFO per direction): join what each lets through.
    java.util.ArrayDeque<ByteString> requestChunks = new java.util.ArrayDeque<>();
    java.util.ArrayDeque<ByteString> responseChunks = new java.util.ArrayDeque<>();
    for (ProcessingRequest request : stream.requests()) {
      if (request.hasRequestBody()) {
        requestChunks.add(request.getRequestBody().getBody());
      } else if (request.hasResponseBody()) {
        responseChunks.add(request.getResponseBody().getBody());
      }
    }
    StringBuilder through = new StringBuilder();
    String bodyExtras = null;
    for (ProcessingResponse response : stream.responses()) {
      if (response.hasOverrideMessageTimeout()
          && response.toBuilder().clearOverrideMessageTimeout().build().equals(ProcessingResponse.getDefaultInstance())) {
        // Whether the service waits at all (a context lookup still in flight when the last bytes came),
        // how long and how often it extends, depends on the host's timing, not on the filter: a slow
        // CI host made a context-first flow wait where the emulation did not. Left out of the transcript;
        // Envoy's override_message_timeout_ignored counter checks the extensions (RealEnvoyFlowsTest).
        continue;
      }
      if (response.hasRequestBody() || response.hasResponseBody()) {
        var common = response.hasRequestBody() ? response.getRequestBody().getResponse() : response.getResponseBody().getResponse();
        ByteString sent = (response.hasRequestBody() ? requestChunks : responseChunks).poll();
        through.append(common.hasBodyMutation() ? common.getBodyMutation().getBody().toStringUtf8() : sent == null ? "" : sent.toStringUtf8());
        ProcessingResponse rest = response.hasRequestBody()
            ? response.toBuilder().clearRequestBody().build()
            : response.toBuilder().clearResponseBody().build();
        var restCommon = common.toBuilder().clearBodyMutation().build();
        if (rest.equals(ProcessingResponse.getDefaultInstance()) && restCommon.equals(restCommon.getDefaultInstanceForType())) {
          continue;
        }
        // Metadata goes out with the reply that releases a usage event and again with the last one;
        // whether those are one reply or two depends on how TCP reads cut the body. What stays is the
        // last value published during the body, noted after the bytes it came with.
        bodyExtras = "service body reply with " + compact(rest.toString()) + " " + compact(restCommon.toString());
        continue;
      }
      flushBody(lines, through, bodyExtras);
      bodyExtras = null;
      lines.add("service " + compact(response.toString()));
    }
    flushBody(lines, through, bodyExtras);
    return lines;
  }

  private static void flushBody(List<String> lines, StringBuilder through, String bodyExtras) {
    flushThrough(lines, through);
    if (bodyExtras != null) {
      lines.add(bodyExtras);
    }
  }

  private static void flushThrough(List<String> lines, StringBuilder through) {
    if (through.length() > 0) {
      lines.add("service lets through " + through);
      through.setLength(0);
    }
  }

  private static void flush(List<String> lines, String kind, StringBuilder body) {
    if (kind != null) {
      lines.add(kind + " " + body);
    }
  }

  private static String headers(HeaderMap map) {
    Map<String, String> sorted = new TreeMap<>();
    for (HeaderValue h : map.getHeadersList()) {
      String name = h.getKey().toLowerCase(Locale.ROOT);
      if (!PROXY_HEADERS.contains(name)) {
        ByteString raw = h.getRawValue();
        sorted.merge(name, raw.isEmpty() ? h.getValue() : raw.toStringUtf8(), (a, b) -> a + "," + b);
      }
    }
    return sorted.toString();
  }

  private static String attributes(Map<String, Struct> attributes) {
    return attributes.isEmpty() ? "" : " attributes " + compact(new TreeMap<>(attributes).toString());
  }

  private static String compact(String protoText) {
    return protoText.replaceAll("\\s+", " ").trim();
  }
}
