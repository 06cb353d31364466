package io.disaggusage.extproc.driver;

import com.google.protobuf.ByteString;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProtocolConfiguration;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The ext_proc messages of one leg as Envoy's filter writes them: header values in {@code raw_value}
 * (Envoy 1.40 no longer fills {@code value}), request attributes filed under the filter's name, and
 * bodies in STREAMED mode, one message per data callback with {@code end_of_stream} on the last.
 */
public final class EnvoyRequests {
  /** The attribute naming the upstream cluster the route picked; the shipped filter requests it. */
  public static final String CLUSTER_NAME = "xds.cluster_name";

  private EnvoyRequests() {}

  /** One header as Envoy sends it: the value in {@code raw_value}, UTF-8. */
  public static HeaderValue header(String name, String value) {
    return HeaderValue.newBuilder().setKey(name).setRawValue(ByteString.copyFrom(value, StandardCharsets.UTF_8)).build();
  }

  /** The headers in the map's iteration order. */
  public static HeaderMap headers(Map<String, String> headers) {
    HeaderMap.Builder map = HeaderMap.newBuilder();
    headers.forEach((name, value) -> map.addHeaders(header(name, value)));
    return map.build();
  }

  /** The headers given as name, value, name, value, … in that order. */
  public static HeaderMap headers(String... namesAndValues) {
    if (namesAndValues.length % 2 != 0) {
      throw new IllegalArgumentException("a value for every name: " + namesAndValues.length + " strings");
    }
    HeaderMap.Builder map = HeaderMap.newBuilder();
    for (int i = 0; i < namesAndValues.length; i += 2) {
      map.addHeaders(header(namesAndValues[i], namesAndValues[i + 1]));
    }
    return map.build();
  }

  /**
   * The request headers message; with the {@value #CLUSTER_NAME} attribute under the filter's name
   * (Envoy sends the request attributes with the first request message) unless {@code cluster} is null.
   */
  public static ProcessingRequest.Builder requestHeaders(HeaderMap headers, String cluster, boolean endOfStream) {
    ProcessingRequest.Builder message =
        ProcessingRequest.newBuilder()
            .setRequestHeaders(HttpHeaders.newBuilder().setHeaders(headers).setEndOfStream(endOfStream));
    if (cluster != null) {
      message.putAttributes(
          FilterConfigs.FILTER_NAME,
          Struct.newBuilder().putFields(CLUSTER_NAME, Value.newBuilder().setStringValue(cluster).build()).build());
    }
    return message;
  }

  /** The response headers message. */
  public static ProcessingRequest responseHeaders(HeaderMap headers, boolean endOfStream) {
    return ProcessingRequest.newBuilder()
        .setResponseHeaders(HttpHeaders.newBuilder().setHeaders(headers).setEndOfStream(endOfStream))
        .build();
  }

  /** One data callback's bytes. */
  public static HttpBody body(byte[] chunk, boolean endOfStream) {
    return HttpBody.newBuilder().setBody(ByteString.copyFrom(chunk)).setEndOfStream(endOfStream).build();
  }

  /** One body message of {@code direction}. */
  public static ProcessingRequest body(Direction direction, byte[] chunk, boolean endOfStream) {
    ProcessingRequest.Builder message = ProcessingRequest.newBuilder();
    HttpBody body = body(chunk, endOfStream);
    return (direction == Direction.REQUEST ? message.setRequestBody(body) : message.setResponseBody(body)).build();
  }

  /** A body in these chunks, one STREAMED message each, the last carrying {@code end_of_stream}. */
  public static List<ProcessingRequest> body(Direction direction, List<byte[]> chunks) {
    List<ProcessingRequest> messages = new ArrayList<>(chunks.size());
    for (int i = 0; i < chunks.size(); i++) {
      messages.add(body(direction, chunks.get(i), i == chunks.size() - 1));
    }
    return messages;
  }

  /** What Envoy tells the processor, on a stream's first message, of the body modes it runs with. */
  public static ProtocolConfiguration.Builder protocolConfiguration(ProcessingMode mode) {
    return ProtocolConfiguration.newBuilder()
        .setRequestBodyMode(mode.getRequestBodyMode())
        .setResponseBodyMode(mode.getResponseBodyMode());
  }

  /** The chunk a body message carries, or null for a message of another kind. */
  static ByteString chunk(ProcessingRequest message) {
    return switch (message.getRequestCase()) {
      case REQUEST_BODY -> message.getRequestBody().getBody();
      case RESPONSE_BODY -> message.getResponseBody().getBody();
      default -> null;
    };
  }
}
