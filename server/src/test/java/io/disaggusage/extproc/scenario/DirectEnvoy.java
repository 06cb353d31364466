package io.disaggusage.extproc.scenario;

import com.google.protobuf.ByteString;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.HeaderSendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.CommonResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Envoy's ext_proc filter reduced to what decides the client-visible bytes, calling the service's
 * {@code process} directly (no gRPC, no threads): the fast driver of the property and fuzz tests.
 *
 * <p>It keeps Envoy's rules that matter for bytes: one reply per message in order (a reply of the
 * wrong kind is a protocol violation), {@code mode_override} decides which messages are sent at all, a
 * body reply with a body mutation replaces the chunk, one without forwards the chunk as it came, and a
 * body Envoy does not send to the service passes untouched. Replies that only carry
 * {@code override_message_timeout} are not replies. Timers, buffering limits and header mutations are
 * the fake Envoy's job ({@code simulation.envoy}); this driver trades them for speed.
 */
public final class DirectEnvoy {
  /** The key Envoy files attributes under. */
  private static final String ATTRIBUTES_KEY = "envoy.filters.http.ext_proc";

  private final ExternalProcessorGrpc.ExternalProcessorImplBase service;

  public DirectEnvoy(ExternalProcessorGrpc.ExternalProcessorImplBase service) {
    this.service = service;
  }

  /** What Envoy saw of one stream. */
  public static final class Stream implements StreamObserver<ProcessingResponse> {
    private enum Kind {
      REQUEST_HEADERS,
      REQUEST_BODY,
      RESPONSE_HEADERS,
      RESPONSE_BODY,
      REQUEST_TRAILERS,
      RESPONSE_TRAILERS
    }

    private record Pending(Kind kind, byte[] chunk) {}

    private final StreamObserver<ProcessingRequest> toService;
    private final ArrayDeque<Pending> pending = new ArrayDeque<>();
    private final ByteArrayOutputStream client = new ByteArrayOutputStream();
    private final ByteArrayOutputStream upstream = new ByteArrayOutputStream();
    private final List<ProcessingResponse> replies = new ArrayList<>();
    private ProcessingMode mode =
        ProcessingMode.newBuilder()
            .setRequestHeaderMode(HeaderSendMode.SEND)
            .setResponseHeaderMode(HeaderSendMode.SEND)
            .setRequestBodyMode(BodySendMode.NONE)
            .setResponseBodyMode(BodySendMode.NONE)
            .build();
    private Struct metadata = Struct.getDefaultInstance();
    private String violation;
    private boolean serverClosed;
    private boolean responseHeadersSent;
    private int timerExtensions;

    Stream(ExternalProcessorGrpc.ExternalProcessorImplBase service) {
      this.toService = service.process(this);
    }

    private void send(Kind kind, byte[] chunk, ProcessingRequest request) {
      synchronized (this) {
        pending.add(new Pending(kind, chunk));
      }
      toService.onNext(request);
    }

    /** Request headers (and the cluster attribute when non-null). */
    public Stream requestHeaders(Map<String, String> headers, String cluster, boolean endOfStream) {
      ProcessingRequest.Builder r =
          ProcessingRequest.newBuilder()
              .setRequestHeaders(HttpHeaders.newBuilder().setHeaders(headerMap(headers)).setEndOfStream(endOfStream));
      if (cluster != null) {
        r.putAttributes(
            ATTRIBUTES_KEY,
            Struct.newBuilder().putFields("xds.cluster_name", Value.newBuilder().setStringValue(cluster).build()).build());
      }
      send(Kind.REQUEST_HEADERS, null, r.build());
      return this;
    }

    /** The request body in these chunks; the last carries end_of_stream. Skipped when the mode says so. */
    public Stream requestBody(List<byte[]> chunks) {
      return body(true, chunks);
    }

    /** Response headers; skipped when the mode says so. */
    public Stream responseHeaders(Map<String, String> headers, boolean endOfStream) {
      if (mode.getResponseHeaderMode() == HeaderSendMode.SKIP) {
        return this;
      }
      responseHeadersSent = true;
      send(
          Kind.RESPONSE_HEADERS,
          null,
          ProcessingRequest.newBuilder()
              .setResponseHeaders(HttpHeaders.newBuilder().setHeaders(headerMap(headers)).setEndOfStream(endOfStream))
              .build());
      return this;
    }

    /** The response body in these chunks; passes untouched when the mode does not stream it. */
    public Stream responseBody(List<byte[]> chunks) {
      return body(false, chunks);
    }

    /** Body chunks of one direction as STREAMED messages, or straight through when not streamed. */
    private Stream body(boolean request, List<byte[]> chunks) {
      BodySendMode bodyMode = request ? mode.getRequestBodyMode() : mode.getResponseBodyMode();
      if (bodyMode != BodySendMode.STREAMED) {
        chunks.forEach((request ? upstream : client)::writeBytes);
        return this;
      }
      for (int i = 0; i < chunks.size(); i++) {
        byte[] c = chunks.get(i);
        HttpBody body = HttpBody.newBuilder().setBody(ByteString.copyFrom(c)).setEndOfStream(i == chunks.size() - 1).build();
        ProcessingRequest.Builder message = ProcessingRequest.newBuilder();
        send(
            request ? Kind.REQUEST_BODY : Kind.RESPONSE_BODY,
            c,
            (request ? message.setRequestBody(body) : message.setResponseBody(body)).build());
      }
      return this;
    }

    /** One response body message; passes untouched when the mode does not stream the body. */
    public Stream responseChunk(byte[] chunk, boolean endOfStream) {
      if (mode.getResponseBodyMode() != BodySendMode.STREAMED) {
        client.writeBytes(chunk);
        return this;
      }
      send(
          Kind.RESPONSE_BODY,
          chunk,
          ProcessingRequest.newBuilder()
              .setResponseBody(HttpBody.newBuilder().setBody(ByteString.copyFrom(chunk)).setEndOfStream(endOfStream))
              .build());
      return this;
    }

    /**
     * Sends one raw message as it is (fuzzing). {@code expectsReply} false for a message the service
     * must ignore (a body message after that direction's end_of_stream, Envoy's known duplicate).
     */
    public Stream raw(ProcessingRequest request, boolean expectsReply) {
      Kind kind =
          switch (request.getRequestCase()) {
            case REQUEST_HEADERS -> Kind.REQUEST_HEADERS;
            case REQUEST_BODY -> Kind.REQUEST_BODY;
            case RESPONSE_HEADERS -> Kind.RESPONSE_HEADERS;
            case RESPONSE_BODY -> Kind.RESPONSE_BODY;
            case REQUEST_TRAILERS -> Kind.REQUEST_TRAILERS;
            case RESPONSE_TRAILERS -> Kind.RESPONSE_TRAILERS;
            default -> null;
          };
      if (kind == null || !expectsReply) {
        toService.onNext(request);
        return this;
      }
      byte[] chunk =
          request.hasRequestBody()
              ? request.getRequestBody().getBody().toByteArray()
              : request.hasResponseBody() ? request.getResponseBody().getBody().toByteArray() : null;
      send(kind, chunk, request);
      return this;
    }

    /**
     * Whether Envoy, under the processing mode the service has set so far, would send a message of
     * this kind at all (a body in mode NONE, or response headers in mode SKIP, never reach the service).
     */
    public boolean envoyWouldSend(ProcessingRequest.RequestCase kind) {
      return switch (kind) {
        case REQUEST_BODY -> mode.getRequestBodyMode() == BodySendMode.STREAMED;
        case RESPONSE_HEADERS -> mode.getResponseHeaderMode() != HeaderSendMode.SKIP;
        case RESPONSE_BODY -> mode.getResponseBodyMode() == BodySendMode.STREAMED;
        default -> true;
      };
    }

    /** Envoy ends the stream normally. */
    public Stream complete() {
      toService.onCompleted();
      return this;
    }

    /** Envoy resets the stream (client gone, timeout, filter destroyed). */
    public Stream cancel() {
      toService.onError(new RuntimeException("stream reset"));
      return this;
    }

    public byte[] clientBody() {
      return client.toByteArray();
    }

    public String clientBodyUtf8() {
      return client.toString(StandardCharsets.UTF_8);
    }

    /** Replies still owed by the service. */
    public synchronized int owed() {
      return pending.size();
    }

    /**
     * Waits until the service has answered every message sent so far or broken the protocol (an error
     * closing the stream included); woken by each reply. Returns false when {@code timeout} passed first.
     */
    public synchronized boolean awaitAnswered(Duration timeout) throws InterruptedException {
      long deadline = System.nanoTime() + timeout.toNanos();
      while (!pending.isEmpty() && violation == null) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          return false;
        }
        TimeUnit.NANOSECONDS.timedWait(this, left);
      }
      return true;
    }

    /** The first protocol violation seen, or null. */
    public String violation() {
      return violation;
    }

    public boolean responseHeadersSent() {
      return responseHeadersSent;
    }

    public int timerExtensions() {
      return timerExtensions;
    }

    public List<ProcessingResponse> replies() {
      return replies;
    }

    /** A value of the dynamic metadata last set under {@code namespace}, or null. */
    public String metadata(String namespace, String key) {
      Value ns = metadata.getFieldsMap().get(namespace);
      if (ns == null || !ns.hasStructValue()) {
        return null;
      }
      Value v = ns.getStructValue().getFieldsMap().get(key);
      if (v == null) {
        return null;
      }
      return v.hasStringValue() ? v.getStringValue() : v.hasNumberValue() ? Long.toString((long) v.getNumberValue())
          : v.hasBoolValue() ? Boolean.toString(v.getBoolValue()) : v.toString();
    }

    @Override
    public synchronized void onNext(ProcessingResponse reply) {
      try {
        handle(reply);
      } finally {
        notifyAll(); // wakes awaitAnswered
      }
    }

    private void handle(ProcessingResponse reply) {
      replies.add(reply);
      if (reply.getResponseCase() == ProcessingResponse.ResponseCase.RESPONSE_NOT_SET) {
        if (reply.hasOverrideMessageTimeout()) {
          timerExtensions++;
        } else {
          fail("empty reply");
        }
        return;
      }
      Pending p = pending.poll();
      if (p == null) {
        fail("spurious reply " + reply.getResponseCase());
        return;
      }
      Kind got =
          switch (reply.getResponseCase()) {
            case REQUEST_HEADERS -> Kind.REQUEST_HEADERS;
            case REQUEST_BODY -> Kind.REQUEST_BODY;
            case RESPONSE_HEADERS -> Kind.RESPONSE_HEADERS;
            case RESPONSE_BODY -> Kind.RESPONSE_BODY;
            case REQUEST_TRAILERS -> Kind.REQUEST_TRAILERS;
            case RESPONSE_TRAILERS -> Kind.RESPONSE_TRAILERS;
            default -> null;
          };
      if (got != p.kind()) {
        fail("reply " + reply.getResponseCase() + " to " + p.kind());
        return;
      }
      if (reply.hasModeOverride()) {
        ProcessingMode o = reply.getModeOverride();
        mode =
            mode.toBuilder()
                .setResponseHeaderMode(
                    o.getResponseHeaderMode() == HeaderSendMode.DEFAULT ? mode.getResponseHeaderMode() : o.getResponseHeaderMode())
                .setRequestBodyMode(o.getRequestBodyMode())
                .setResponseBodyMode(o.getResponseBodyMode())
                .build();
      }
      if (reply.hasDynamicMetadata()) {
        metadata = reply.getDynamicMetadata();
      }
      if (p.kind() == Kind.RESPONSE_BODY || p.kind() == Kind.REQUEST_BODY) {
        CommonResponse common =
            p.kind() == Kind.RESPONSE_BODY ? reply.getResponseBody().getResponse() : reply.getRequestBody().getResponse();
        byte[] out =
            common.hasBodyMutation()
                ? (common.getBodyMutation().getClearBody() ? new byte[0] : common.getBodyMutation().getBody().toByteArray())
                : p.chunk();
        (p.kind() == Kind.RESPONSE_BODY ? client : upstream).writeBytes(out);
      }
    }

    private void fail(String what) {
      if (violation == null) {
        violation = what;
      }
    }

    @Override
    public synchronized void onError(Throwable t) {
      serverClosed = true;
      fail("server closed the stream with an error: " + t);
      notifyAll(); // wakes awaitAnswered
    }

    @Override
    public void onCompleted() {
      serverClosed = true;
    }

    public boolean serverClosed() {
      return serverClosed;
    }
  }

  /** Opens a stream; the service sees nothing until the first message. */
  public Stream open() {
    return new Stream(service);
  }

  static HeaderMap headerMap(Map<String, String> headers) {
    HeaderMap.Builder map = HeaderMap.newBuilder();
    headers.forEach(
        (k, v) ->
            map.addHeaders(
                HeaderValue.newBuilder().setKey(k).setRawValue(ByteString.copyFrom(v, StandardCharsets.UTF_8))));
    return map.build();
  }
}
