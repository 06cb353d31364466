package io.disaggusage.extproc.emulator.envoy;

import io.disaggusage.extproc.driver.Chunking;
import com.google.protobuf.Struct;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * One HTTP exchange through the fake Envoy: what the downstream client sends, what the upstream
 * answers, the attributes Envoy would evaluate, and how the harness schedules the data (chunking,
 * gates, delays, interleaving, injected faults). Immutable; build with {@link #builder()}.
 */
public final class Exchange {

  /** When the upstream starts sending its response. */
  public enum UpstreamStart {
    /** After the whole request (headers, body, trailers) has been forwarded to it. */
    AFTER_REQUEST_COMPLETE,
    /**
     * As soon as the request headers reached it, while the request body may still be flowing: the
     * directions interleave (a {@code response_headers} message can be sent while request body
     * chunks are still outstanding).
     */
    AFTER_REQUEST_HEADERS
  }

  final String name;
  final HeaderList requestHeaders;
  final byte[] requestBody;
  final Chunking requestChunking;
  final HeaderList requestTrailers;
  final int responseStatus;
  final HeaderList responseHeaders;
  final byte[] responseBody;
  final Chunking responseChunking;
  final HeaderList responseTrailers;
  final Map<String, Object> requestAttributes;
  final Map<String, Object> responseAttributes;
  final Map<String, Struct> presetDynamicMetadata;
  final Map<String, String> grpcInitialMetadata;
  final UpstreamStart upstreamStart;
  final boolean gateRequestBody;
  final boolean gateResponseHeaders;
  final boolean gateResponseBody;
  final Duration requestChunkDelay;
  final Duration responseChunkDelay;
  final boolean duplicateFinalBodyMessage;
  final int downstreamResetAfterResponseChunks;
  final boolean clientClosesAfterResponse;
  final byte[] clientClosesAfterReading;

  private Exchange(Builder b) {
    this.name = b.name;
    this.requestHeaders = new HeaderList()
        .add(":method", b.method)
        .add(":path", b.path)
        .add(":authority", b.authority)
        .add(":scheme", b.scheme);
    for (var e : b.requestHeaders.entries()) {
      requestHeaders.add(e.getKey(), e.getValue());
    }
    if (b.requestContentLength && !requestHeaders.contains("content-length")) {
      requestHeaders.add("content-length", Integer.toString(b.requestBody.length));
    }
    this.requestBody = b.requestBody.clone();
    this.requestChunking = b.requestChunking;
    this.requestTrailers = b.requestTrailers.size() == 0 ? null : b.requestTrailers.copy();
    this.responseStatus = b.responseStatus;
    this.responseHeaders = new HeaderList().add(":status", Integer.toString(b.responseStatus));
    for (var e : b.responseHeaders.entries()) {
      responseHeaders.add(e.getKey(), e.getValue());
    }
    if (b.responseContentLength && !responseHeaders.contains("content-length")) {
      responseHeaders.add("content-length", Integer.toString(b.responseBody.length));
    }
    this.responseBody = b.responseBody.clone();
    this.responseChunking = b.responseChunking;
    this.responseTrailers = b.responseTrailers.size() == 0 ? null : b.responseTrailers.copy();
    this.requestAttributes = Map.copyOf(b.requestAttributes);
    this.responseAttributes = Map.copyOf(b.responseAttributes);
    this.presetDynamicMetadata = Map.copyOf(b.presetDynamicMetadata);
    this.grpcInitialMetadata = Map.copyOf(b.grpcInitialMetadata);
    this.upstreamStart = b.upstreamStart;
    this.gateRequestBody = b.gateRequestBody;
    this.gateResponseHeaders = b.gateResponseHeaders;
    this.gateResponseBody = b.gateResponseBody;
    this.requestChunkDelay = b.requestChunkDelay;
    this.responseChunkDelay = b.responseChunkDelay;
    this.duplicateFinalBodyMessage = b.duplicateFinalBodyMessage;
    this.downstreamResetAfterResponseChunks = b.downstreamResetAfterResponseChunks;
    this.clientClosesAfterResponse = b.clientClosesAfterResponse;
    this.clientClosesAfterReading = b.clientClosesAfterReading;
  }

  public static Builder builder() {
    return new Builder();
  }

  /** A POST with a JSON body and a {@code content-length}; the upstream answers 200 with no body. */
  public static Builder post(String path, String jsonBody) {
    return builder()
        .method("POST")
        .path(path)
        .requestHeader("content-type", "application/json")
        .requestBody(jsonBody)
        .requestContentLength();
  }

  public String name() {
    return name;
  }

  /** The downstream request headers, pseudo-headers first (a copy). */
  public HeaderList requestHeaders() {
    return requestHeaders.copy();
  }

  /** The upstream response headers, {@code :status} first (a copy). */
  public HeaderList responseHeaders() {
    return responseHeaders.copy();
  }

  public byte[] requestBody() {
    return requestBody.clone();
  }

  public byte[] responseBody() {
    return responseBody.clone();
  }

  @Override
  public String toString() {
    return "Exchange[" + name + "]";
  }

  /** Builder for {@link Exchange}. Defaults: {@code GET /} to authority {@code upstream.local}, 200. */
  public static final class Builder {
    private String name = "exchange";
    private String method = "GET";
    private String path = "/";
    private String authority = "upstream.local";
    private String scheme = "http";
    private final HeaderList requestHeaders = new HeaderList();
    private byte[] requestBody = new byte[0];
    private boolean requestContentLength;
    private Chunking requestChunking = Chunking.whole();
    private final HeaderList requestTrailers = new HeaderList();
    private int responseStatus = 200;
    private final HeaderList responseHeaders = new HeaderList();
    private byte[] responseBody = new byte[0];
    private boolean responseContentLength;
    private Chunking responseChunking = Chunking.whole();
    private final HeaderList responseTrailers = new HeaderList();
    private final Map<String, Object> requestAttributes = new LinkedHashMap<>();
    private final Map<String, Object> responseAttributes = new LinkedHashMap<>();
    private final Map<String, Struct> presetDynamicMetadata = new LinkedHashMap<>();
    private final Map<String, String> grpcInitialMetadata = new LinkedHashMap<>();
    private UpstreamStart upstreamStart = UpstreamStart.AFTER_REQUEST_COMPLETE;
    private boolean gateRequestBody;
    private boolean gateResponseHeaders;
    private boolean gateResponseBody;
    private Duration requestChunkDelay = Duration.ZERO;
    private Duration responseChunkDelay = Duration.ZERO;
    private boolean duplicateFinalBodyMessage;
    private int downstreamResetAfterResponseChunks = -1;
    private boolean clientClosesAfterResponse;
    private byte[] clientClosesAfterReading;

    private Builder() {}

    /** A label used in thread names and error messages. */
    public Builder name(String name) {
      this.name = Objects.requireNonNull(name);
      return this;
    }

    public Builder method(String method) {
      this.method = Objects.requireNonNull(method);
      return this;
    }

    public Builder path(String path) {
      this.path = Objects.requireNonNull(path);
      return this;
    }

    public Builder authority(String authority) {
      this.authority = Objects.requireNonNull(authority);
      return this;
    }

    public Builder scheme(String scheme) {
      this.scheme = Objects.requireNonNull(scheme);
      return this;
    }

    /** Adds a request header (repeats allowed; added after the pseudo-headers, in call order). */
    public Builder requestHeader(String name, String value) {
      requestHeaders.add(name, value);
      return this;
    }

    public Builder requestBody(byte[] body) {
      this.requestBody = body.clone();
      return this;
    }

    public Builder requestBody(String body) {
      return requestBody(body.getBytes(StandardCharsets.UTF_8));
    }

    /** Adds {@code content-length} computed from the request body (unless a header sets it). */
    public Builder requestContentLength() {
      this.requestContentLength = true;
      return this;
    }

    public Builder requestChunking(Chunking chunking) {
      this.requestChunking = Objects.requireNonNull(chunking);
      return this;
    }

    /** Adds a request trailer; with trailers no request body message carries end_of_stream. */
    public Builder requestTrailer(String name, String value) {
      requestTrailers.add(name, value);
      return this;
    }

    public Builder responseStatus(int status) {
      this.responseStatus = status;
      return this;
    }

    public Builder responseHeader(String name, String value) {
      responseHeaders.add(name, value);
      return this;
    }

    public Builder responseBody(byte[] body) {
      this.responseBody = body.clone();
      return this;
    }

    public Builder responseBody(String body) {
      return responseBody(body.getBytes(StandardCharsets.UTF_8));
    }

    /** Adds {@code content-length} computed from the response body (unless a header sets it). */
    public Builder responseContentLength() {
      this.responseContentLength = true;
      return this;
    }

    public Builder responseChunking(Chunking chunking) {
      this.responseChunking = Objects.requireNonNull(chunking);
      return this;
    }

    public Builder responseTrailer(String name, String value) {
      responseTrailers.add(name, value);
      return this;
    }

    /**
     * Value of a request attribute (e.g. {@code xds.cluster_name}). Sent only if the filter config
     * lists it in {@code request_attributes}. {@code request.path}, {@code request.method},
     * {@code request.host}, {@code request.scheme} and {@code request.id} are derived from the
     * request headers when not given. Boolean → bool, Number → number, anything else → string.
     */
    public Builder requestAttribute(String name, Object value) {
      requestAttributes.put(name, Objects.requireNonNull(value));
      return this;
    }

    /**
     * Value of a response attribute; {@code response.code} is derived from {@code :status} when
     * not given, and request attributes are visible in the response direction too.
     */
    public Builder responseAttribute(String name, Object value) {
      responseAttributes.put(name, Objects.requireNonNull(value));
      return this;
    }

    /** Dynamic metadata set by earlier filters (forwarded per {@code forwarding_namespaces}). */
    public Builder dynamicMetadata(String namespace, Struct value) {
      presetDynamicMetadata.put(namespace, value);
      return this;
    }

    /** Per-route {@code grpc_initial_metadata}, merged by key over the filter-level metadata. */
    public Builder grpcInitialMetadata(String key, String value) {
      grpcInitialMetadata.put(key, value);
      return this;
    }

    public Builder upstreamStart(UpstreamStart start) {
      this.upstreamStart = Objects.requireNonNull(start);
      return this;
    }

    /** Convenience for {@link UpstreamStart#AFTER_REQUEST_HEADERS}. */
    public Builder interleaveDirections() {
      return upstreamStart(UpstreamStart.AFTER_REQUEST_HEADERS);
    }

    /** Each request chunk (and the trailers) waits for an explicit release on the handle. */
    public Builder gateRequestBody() {
      this.gateRequestBody = true;
      return this;
    }

    /** The upstream response headers wait for {@link ExchangeHandle#releaseResponseHeaders()}. */
    public Builder gateResponseHeaders() {
      this.gateResponseHeaders = true;
      return this;
    }

    /** Each response chunk (and the trailers) waits for an explicit release on the handle. */
    public Builder gateResponseBody() {
      this.gateResponseBody = true;
      return this;
    }

    /** A pause before every request chunk. */
    public Builder requestChunkDelay(Duration delay) {
      this.requestChunkDelay = Objects.requireNonNull(delay);
      return this;
    }

    /** A pause before every response chunk (simulates a slow SSE upstream). */
    public Builder responseChunkDelay(Duration delay) {
      this.responseChunkDelay = Objects.requireNonNull(delay);
      return this;
    }

    /**
     * Fault (envoy#46237): every body message with {@code end_of_stream=true} is sent twice. The
     * duplicate is not queued, so a reply to it is an extra (spurious) reply.
     */
    public Builder duplicateFinalBodyMessage() {
      this.duplicateFinalBodyMessage = true;
      return this;
    }

    /**
     * Fault: the downstream client aborts after the upstream delivered {@code n} response body
     * chunks to Envoy; Envoy half-closes and resets the gRPC stream (the server sees the half-close,
     * then CANCELLED), as real Envoy 1.36 and 1.40 do and as on a message timeout.
     */
    public Builder downstreamResetAfterResponseChunks(int n) {
      if (n < 0) {
        throw new IllegalArgumentException("n must be >= 0");
      }
      this.downstreamResetAfterResponseChunks = n;
      return this;
    }

    /**
     * The client closes its connection as soon as it has read the whole response (a client without a
     * connection pool). With a content-length that can be before Envoy's end of stream, which Envoy
     * then sees as a downstream reset: the ext_proc stream is reset, replies still owed are never read.
     */
    public Builder clientClosesAfterResponse() {
      this.clientClosesAfterResponse = true;
      return this;
    }

    /**
     * The client closes its connection as soon as the bytes it has read contain {@code marker}, as
     * sglang-router does after {@code data: [DONE]} without waiting for the chunked terminator: Envoy
     * sees a downstream reset, and the ext_proc stream is reset before the end-of-stream message.
     */
    public Builder clientClosesAfterReading(String marker) {
      this.clientClosesAfterReading = marker.getBytes(java.nio.charset.StandardCharsets.UTF_8);
      return this;
    }

    public Exchange build() {
      return new Exchange(this);
    }
  }
}
