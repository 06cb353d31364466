package io.disaggusage.extproc.emulator.envoy;

import com.google.protobuf.BoolValue;
import com.google.protobuf.ByteString;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.config.core.v3.HeaderValueOption;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.service.ext_proc.v3.BodyMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.BodyResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.CommonResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.HeadersResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.TrailersResponse;
import java.nio.charset.StandardCharsets;

/** Builders for the replies a scripted ext_proc server sends, matched to the request type. */
public final class ExtProcReplies {
  private ExtProcReplies() {}

  /** The reply of the matching type carrying {@code common} (trailers replies ignore it). */
  public static ProcessingResponse.Builder reply(ProcessingRequest req, CommonResponse common) {
    ProcessingResponse.Builder r = ProcessingResponse.newBuilder();
    HeadersResponse h = HeadersResponse.newBuilder().setResponse(common).build();
    BodyResponse b = BodyResponse.newBuilder().setResponse(common).build();
    switch (req.getRequestCase()) {
      case REQUEST_HEADERS -> r.setRequestHeaders(h);
      case RESPONSE_HEADERS -> r.setResponseHeaders(h);
      case REQUEST_BODY -> r.setRequestBody(b);
      case RESPONSE_BODY -> r.setResponseBody(b);
      case REQUEST_TRAILERS -> r.setRequestTrailers(
          TrailersResponse.newBuilder().setHeaderMutation(common.getHeaderMutation()));
      case RESPONSE_TRAILERS -> r.setResponseTrailers(
          TrailersResponse.newBuilder().setHeaderMutation(common.getHeaderMutation()));
      default -> throw new IllegalArgumentException("no reply type for " + req.getRequestCase());
    }
    return r;
  }

  /** A no-mutation reply of the matching type. */
  public static ProcessingResponse pass(ProcessingRequest req) {
    return reply(req, CommonResponse.getDefaultInstance()).build();
  }

  /** A body reply replacing the chunk/body with {@code text}. */
  public static ProcessingResponse replaceBody(ProcessingRequest req, String text) {
    return reply(
            req,
            CommonResponse.newBuilder()
                .setBodyMutation(
                    BodyMutation.newBuilder().setBody(ByteString.copyFromUtf8(text)))
                .build())
        .build();
  }

  public static ProcessingResponse clearBody(ProcessingRequest req) {
    return reply(
            req,
            CommonResponse.newBuilder()
                .setBodyMutation(BodyMutation.newBuilder().setClearBody(true))
                .build())
        .build();
  }

  /** A reply of the matching type with a header mutation. */
  public static ProcessingResponse mutate(ProcessingRequest req, HeaderMutation mutation) {
    return reply(req, CommonResponse.newBuilder().setHeaderMutation(mutation).build()).build();
  }

  /** {@code set_headers} entry written the recommended way: raw_value only, append unset. */
  /**
   * Passes the headers on with {@code mode} as the stream's new processing mode; without the
   * {@code content-length} header when {@code removeContentLength} (a body rewrite changes the length).
   */
  public static ProcessingResponse switchMode(ProcessingRequest req, ProcessingMode mode, boolean removeContentLength) {
    ProcessingResponse headers = removeContentLength
        ? mutate(req, HeaderMutation.newBuilder().addRemoveHeaders("content-length").build())
        : pass(req);
    return headers.toBuilder().setModeOverride(mode).build();
  }

  public static HeaderValueOption set(String name, String value) {
    return HeaderValueOption.newBuilder()
        .setHeader(
            HeaderValue.newBuilder()
                .setKey(name)
                .setRawValue(ByteString.copyFrom(value, StandardCharsets.UTF_8)))
        .build();
  }

  /** {@code set_headers} entry with {@code append=true}. */
  public static HeaderValueOption append(String name, String value) {
    return set(name, value).toBuilder().setAppend(BoolValue.of(true)).build();
  }

  /** {@code set_headers} entry using the legacy string {@code value} only (Envoy ignores it). */
  public static HeaderValueOption setValueOnly(String name, String value) {
    return HeaderValueOption.newBuilder()
        .setHeader(HeaderValue.newBuilder().setKey(name).setValue(value))
        .build();
  }

  public static String bodyText(ProcessingRequest req) {
    return switch (req.getRequestCase()) {
      case REQUEST_BODY -> req.getRequestBody().getBody().toStringUtf8();
      case RESPONSE_BODY -> req.getResponseBody().getBody().toStringUtf8();
      default -> throw new IllegalArgumentException("not a body message: " + req.getRequestCase());
    };
  }

  public static boolean endOfStream(ProcessingRequest req) {
    return switch (req.getRequestCase()) {
      case REQUEST_HEADERS -> req.getRequestHeaders().getEndOfStream();
      case RESPONSE_HEADERS -> req.getResponseHeaders().getEndOfStream();
      case REQUEST_BODY -> req.getRequestBody().getEndOfStream();
      case RESPONSE_BODY -> req.getResponseBody().getEndOfStream();
      default -> false;
    };
  }
}
