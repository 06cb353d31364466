package io.disaggusage.extproc.stream;

import com.google.protobuf.ByteString;
import com.google.protobuf.Duration;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import io.disaggusage.extproc.classify.RequestHead;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.HeaderSendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.BodyMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.BodyResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.CommonResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.HeadersResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.TrailersResponse;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * Reading Envoy's messages and writing replies the way Envoy honours them (envoy-ext-proc.md). Public
 * for the edge guard's stream, which answers with the same replies.
 */
public final class EnvoyMessages {
  /** The key Envoy files request/response attributes under, whatever the filter is named. */
  static final String ATTRIBUTES_KEY = "envoy.filters.http.ext_proc";

  private EnvoyMessages() {}

  /** Lower-case name to first value; values from {@code raw_value} (Envoy ≥ 1.32 fills only that). */
  public static Map<String, String> headers(HeaderMap map) {
    Map<String, String> out = new LinkedHashMap<>(map.getHeadersCount() * 2);
    for (HeaderValue h : map.getHeadersList()) {
      String value =
          h.getRawValue().isEmpty() ? h.getValue() : h.getRawValue().toString(StandardCharsets.UTF_8);
      out.putIfAbsent(h.getKey().toLowerCase(Locale.ROOT), value);
    }
    return out;
  }

  /** The request headers message as the classifier reads it: method, path without query, headers, cluster. */
  public static RequestHead requestHead(ProcessingRequest request) {
    Map<String, String> map = headers(request.getRequestHeaders().getHeaders());
    String path = map.getOrDefault(":path", "");
    int query = path.indexOf('?');
    return new RequestHead(
        map.getOrDefault(":method", ""),
        query < 0 ? path : path.substring(0, query),
        map,
        attribute(request, "xds.cluster_name"));
  }

  /** A string-valued request attribute such as {@code xds.cluster_name}, or null. */
  static String attribute(ProcessingRequest request, String name) {
    Struct attributes = request.getAttributesMap().get(ATTRIBUTES_KEY);
    if (attributes == null) {
      return null;
    }
    Value value = attributes.getFieldsMap().get(name);
    return value != null && value.hasStringValue() ? value.getStringValue() : null;
  }

  /** Nothing more for this exchange: no further headers, bodies or trailers. */
  public static ProcessingMode allOff() {
    return ProcessingMode.newBuilder()
        .setRequestHeaderMode(HeaderSendMode.SKIP)
        .setResponseHeaderMode(HeaderSendMode.SKIP)
        .setRequestBodyMode(BodySendMode.NONE)
        .setResponseBodyMode(BodySendMode.NONE)
        .setRequestTrailerMode(HeaderSendMode.SKIP)
        .setResponseTrailerMode(HeaderSendMode.SKIP)
        .build();
  }

  /**
   * A full mode (Envoy takes both body modes from an override, so both are always stated):
   * response headers sent when {@code responseHeaders}, trailers skipped.
   */
  static ProcessingMode mode(boolean streamRequestBody, boolean responseHeaders, boolean streamResponseBody) {
    return ProcessingMode.newBuilder()
        .setRequestHeaderMode(HeaderSendMode.SEND)
        .setResponseHeaderMode(responseHeaders ? HeaderSendMode.SEND : HeaderSendMode.SKIP)
        .setRequestBodyMode(streamRequestBody ? BodySendMode.STREAMED : BodySendMode.NONE)
        .setResponseBodyMode(streamResponseBody ? BodySendMode.STREAMED : BodySendMode.NONE)
        .setRequestTrailerMode(HeaderSendMode.SKIP)
        .setResponseTrailerMode(HeaderSendMode.SKIP)
        .build();
  }

  public static ProcessingResponse requestHeaders(HeaderMutation mutation, ProcessingMode mode) {
    return headersReply(true, mutation, mode, null);
  }

  public static ProcessingResponse responseHeaders(HeaderMutation mutation, ProcessingMode mode, Struct metadata) {
    return headersReply(false, mutation, mode, metadata);
  }

  /**
   * The response headers reply of an exchange whose response body is not read (the request body is
   * still streamed when {@code requestStillStreaming}); {@code metadata} may be null.
   */
  static ProcessingResponse skipResponseBody(boolean requestStillStreaming, Struct metadata) {
    return responseHeaders(null, mode(requestStillStreaming, false, false), metadata);
  }

  private static ProcessingResponse headersReply(
      boolean request, HeaderMutation mutation, ProcessingMode mode, Struct metadata) {
    CommonResponse.Builder common = CommonResponse.newBuilder();
    if (mutation != null) {
      common.setHeaderMutation(mutation);
    }
    HeadersResponse headers = HeadersResponse.newBuilder().setResponse(common).build();
    ProcessingResponse.Builder reply = ProcessingResponse.newBuilder();
    if (request) {
      reply.setRequestHeaders(headers);
    } else {
      reply.setResponseHeaders(headers);
    }
    if (mode != null) {
      reply.setModeOverride(mode);
    }
    if (metadata != null) {
      reply.setDynamicMetadata(metadata);
    }
    return reply.build();
  }

  /** The replies that change nothing, built once: they answer nearly every body message. */
  private static final ProcessingResponse REQUEST_BODY_UNCHANGED = build(true, null, null);
  private static final ProcessingResponse RESPONSE_BODY_UNCHANGED = build(false, null, null);

  /** A STREAMED body reply: {@code replacement} null forwards the chunk as it came. */
  public static ProcessingResponse body(boolean request, ByteString replacement, Struct metadata) {
    if (replacement == null && metadata == null) {
      return request ? REQUEST_BODY_UNCHANGED : RESPONSE_BODY_UNCHANGED;
    }
    return build(request, replacement, metadata);
  }

  private static ProcessingResponse build(boolean request, ByteString replacement, Struct metadata) {
    CommonResponse.Builder common = CommonResponse.newBuilder();
    if (replacement != null) {
      common.setBodyMutation(BodyMutation.newBuilder().setBody(replacement));
    }
    BodyResponse body = BodyResponse.newBuilder().setResponse(common).build();
    ProcessingResponse.Builder reply = ProcessingResponse.newBuilder();
    if (request) {
      reply.setRequestBody(body);
    } else {
      reply.setResponseBody(body);
    }
    if (metadata != null) {
      reply.setDynamicMetadata(metadata);
    }
    return reply.build();
  }

  public static ProcessingResponse trailers(boolean request) {
    ProcessingResponse.Builder reply = ProcessingResponse.newBuilder();
    if (request) {
      reply.setRequestTrailers(TrailersResponse.getDefaultInstance());
    } else {
      reply.setResponseTrailers(TrailersResponse.getDefaultInstance());
    }
    return reply.build();
  }

  /** Asks Envoy to extend the running message timer; counts as no reply. */
  static ProcessingResponse extendTimer(long millis) {
    return ProcessingResponse.newBuilder()
        .setOverrideMessageTimeout(
            Duration.newBuilder().setSeconds(millis / 1000).setNanos((int) (millis % 1000) * 1_000_000))
        .build();
  }

  public static HeaderMutation removeHeaders(String... names) {
    HeaderMutation.Builder m = HeaderMutation.newBuilder();
    for (String name : names) {
      m.addRemoveHeaders(name);
    }
    return m.build();
  }
}
