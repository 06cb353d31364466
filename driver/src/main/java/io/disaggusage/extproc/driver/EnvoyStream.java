package io.disaggusage.extproc.driver;

import com.google.protobuf.ByteString;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.HeaderSendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.CommonResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.List;
import java.util.Map;

/**
 * Envoy's side of one ext_proc stream, reduced to what decides the bytes the client and the upstream
 * get: it sends a leg's messages ({@link EnvoyRequests}) to a processor — a service's {@code process}
 * called directly, or a gRPC stub's — and takes the replies in order.
 *
 * <p>It keeps Envoy's rules that matter for bytes: one reply per message in order (a reply of the
 * wrong kind is a protocol violation), a {@code mode_override} on a headers reply decides which
 * messages are sent at all ({@link ReplyRules#overriddenMode}), a body reply with a body mutation
 * replaces the chunk ({@link ReplyRules#mutatedBody}), one without forwards the chunk as it came, and
 * a body Envoy does not send to the processor passes untouched. Replies that only carry
 * {@code override_message_timeout} are not replies. Timers, buffering limits and header mutations are
 * the emulator's fake Envoy's job; this driver trades them for speed.
 *
 * <p>Threads: replies may come on any thread. Sends are serialized (a gRPC call's request side is not
 * thread-safe), and a message is entered as owed before it is sent, so a reply that comes before
 * {@code onNext} returns finds it. A {@link Listener} is called outside the stream's lock.
 */
public final class EnvoyStream implements StreamObserver<ProcessingResponse> {

  /** Opens the processor's side of a stream: {@code service::process} or {@code stub::process}. */
  @FunctionalInterface
  public interface Connector {
    StreamObserver<ProcessingRequest> process(StreamObserver<ProcessingResponse> replies);
  }

  /** Hears of the stream's replies as they are matched, for a driver that sends from callbacks. */
  public interface Listener {
    /** The reply to a message of kind {@code answered}, {@code nanos} after that message was sent. */
    void replied(RequestCase answered, ProcessingResponse reply, long nanos);

    /** A protocol violation ({@link #violation()}); nothing is matched after one of the wrong kind. */
    void violated(String what);

    /** The processor ended the stream: {@code error} null for a normal end. */
    void closed(Throwable error);
  }

  private record Owed(ProcessingRequest message, long sentNanos) {}

  private final Object sendLock = new Object();
  private final ProcessingMode configured;
  private final boolean collectBodies;
  private final Listener listener;
  private StreamObserver<ProcessingRequest> toProcessor;

  private final ArrayDeque<Owed> owed = new ArrayDeque<>();
  private final ByteArrayOutputStream client = new ByteArrayOutputStream();
  private final ByteArrayOutputStream upstream = new ByteArrayOutputStream();
  private ProcessingMode mode;
  private Struct metadata = Struct.getDefaultInstance();
  private String violation;
  private boolean serverClosed;
  private boolean responseHeadersSent;
  private int replies;
  private int timerExtensions;
  private long slowestReplyNanos;

  private EnvoyStream(ProcessingMode configured, boolean collectBodies, Listener listener) {
    this.configured = configured;
    this.mode = configured;
    this.collectBodies = collectBodies;
    this.listener = listener;
  }

  /**
   * A stream under the shipped filter's processing mode ({@link FilterConfigs#shippedMode}) that keeps
   * the client's and the upstream's bytes; the processor sees nothing until the first message.
   */
  public static EnvoyStream open(Connector connector) {
    return open(connector, true, null);
  }

  /**
   * A stream under the shipped processing mode; {@code collectBodies} false keeps no body bytes
   * ({@link #clientBody()} stays empty), {@code listener} (or null) hears of every reply.
   */
  public static EnvoyStream open(Connector connector, boolean collectBodies, Listener listener) {
    EnvoyStream stream = new EnvoyStream(FilterConfigs.shippedMode(), collectBodies, listener);
    stream.toProcessor = connector.process(stream);
    return stream;
  }

  /** Request headers (and the {@code xds.cluster_name} attribute when {@code cluster} is non-null). */
  public EnvoyStream requestHeaders(Map<String, String> headers, String cluster, boolean endOfStream) {
    return send(EnvoyRequests.requestHeaders(EnvoyRequests.headers(headers), cluster, endOfStream).build());
  }

  /** The request body in these chunks; the last carries end_of_stream. Skipped when the mode says so. */
  public EnvoyStream requestBody(List<byte[]> chunks) {
    return body(Direction.REQUEST, chunks);
  }

  /** Response headers; skipped when the mode says so. */
  public EnvoyStream responseHeaders(Map<String, String> headers, boolean endOfStream) {
    return responseHeaders(EnvoyRequests.headers(headers), endOfStream);
  }

  /** Response headers; skipped when the mode says so. */
  public EnvoyStream responseHeaders(HeaderMap headers, boolean endOfStream) {
    if (!envoyWouldSend(RequestCase.RESPONSE_HEADERS)) {
      return this;
    }
    synchronized (this) {
      responseHeadersSent = true;
    }
    return send(EnvoyRequests.responseHeaders(headers, endOfStream));
  }

  /** The response body in these chunks; passes untouched when the mode does not stream it. */
  public EnvoyStream responseBody(List<byte[]> chunks) {
    return body(Direction.RESPONSE, chunks);
  }

  /** One response body message; passes untouched when the mode does not stream the body. */
  public EnvoyStream responseChunk(byte[] chunk, boolean endOfStream) {
    return chunk(Direction.RESPONSE, chunk, endOfStream);
  }

  /** One body message of {@code direction}; passes untouched when the mode does not stream that body. */
  public EnvoyStream chunk(Direction direction, byte[] chunk, boolean endOfStream) {
    return streamed(direction) ? send(EnvoyRequests.body(direction, chunk, endOfStream)) : pass(direction, List.of(chunk));
  }

  /** Body chunks of one direction as STREAMED messages, or straight through when not streamed. */
  private EnvoyStream body(Direction direction, List<byte[]> chunks) {
    if (!streamed(direction)) {
      return pass(direction, chunks);
    }
    EnvoyRequests.body(direction, chunks).forEach(this::send);
    return this;
  }

  private boolean streamed(Direction direction) {
    return envoyWouldSend(direction == Direction.REQUEST ? RequestCase.REQUEST_BODY : RequestCase.RESPONSE_BODY);
  }

  /** A body Envoy does not send to the processor: it reaches the other side untouched. */
  private synchronized EnvoyStream pass(Direction direction, List<byte[]> chunks) {
    if (collectBodies) {
      chunks.forEach((direction == Direction.REQUEST ? upstream : client)::writeBytes);
    }
    return this;
  }

  /** Sends one message, owed a reply (unless it is of no kind at all). */
  public EnvoyStream send(ProcessingRequest message) {
    return raw(message, true);
  }

  /**
   * Sends one message as it is (fuzzing). {@code expectsReply} false for a message the processor must
   * ignore (a body message after that direction's end_of_stream, Envoy's known duplicate).
   */
  public EnvoyStream raw(ProcessingRequest message, boolean expectsReply) {
    synchronized (sendLock) {
      if (expectsReply && message.getRequestCase() != RequestCase.REQUEST_NOT_SET) {
        synchronized (this) {
          owed.add(new Owed(message, System.nanoTime()));
        }
      }
      toProcessor.onNext(message);
    }
    return this;
  }

  /**
   * Whether Envoy, under the processing mode the processor has set so far, would send a message of
   * this kind at all (a body in mode NONE, or response headers in mode SKIP, never reach it).
   */
  public synchronized boolean envoyWouldSend(RequestCase kind) {
    return switch (kind) {
      case REQUEST_BODY -> mode.getRequestBodyMode() == BodySendMode.STREAMED;
      case RESPONSE_HEADERS -> mode.getResponseHeaderMode() != HeaderSendMode.SKIP;
      case RESPONSE_BODY -> mode.getResponseBodyMode() == BodySendMode.STREAMED;
      default -> true;
    };
  }

  /** Envoy ends the stream normally. */
  public EnvoyStream complete() {
    synchronized (sendLock) {
      toProcessor.onCompleted();
    }
    return this;
  }

  /** Envoy resets the stream (client gone, timeout, filter destroyed). */
  public EnvoyStream cancel() {
    synchronized (sendLock) {
      toProcessor.onError(new RuntimeException("stream reset"));
    }
    return this;
  }

  /**
   * Waits until every message sent has its reply, a protocol violation was seen or the processor ended
   * the stream, or {@code timeout} passed; returns whether every reply came.
   */
  public synchronized boolean awaitReplies(Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!owed.isEmpty() && violation == null && !serverClosed) {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        break;
      }
      wait(left / 1_000_000, (int) (left % 1_000_000));
    }
    return owed.isEmpty();
  }

  public synchronized byte[] clientBody() {
    return client.toByteArray();
  }

  public synchronized String clientBodyUtf8() {
    return client.toString(StandardCharsets.UTF_8);
  }

  /** What reached the upstream of a request body. */
  public synchronized byte[] upstreamBody() {
    return upstream.toByteArray();
  }

  /** Replies still owed by the processor. */
  public synchronized int owed() {
    return owed.size();
  }

  /** The kind of the oldest message still owed a reply, or null. */
  public synchronized RequestCase oldestOwed() {
    Owed first = owed.peek();
    return first == null ? null : first.message().getRequestCase();
  }

  /** The first protocol violation seen, or null. */
  public synchronized String violation() {
    return violation;
  }

  public synchronized boolean responseHeadersSent() {
    return responseHeadersSent;
  }

  public synchronized int timerExtensions() {
    return timerExtensions;
  }

  /** The processing mode Envoy runs with now. */
  public synchronized ProcessingMode mode() {
    return mode;
  }

  /** The longest a reply took after its message was sent. */
  public synchronized long slowestReplyNanos() {
    return slowestReplyNanos;
  }

  /** How many replies came, timer extensions and violations included. */
  public synchronized int replies() {
    return replies;
  }

  /** A value of the dynamic metadata last set under {@code namespace}, or null. */
  public synchronized String metadata(String namespace, String key) {
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

  public synchronized boolean serverClosed() {
    return serverClosed;
  }

  @Override
  public void onNext(ProcessingResponse reply) {
    Owed answered = null;
    long nanos = 0;
    String failure = null;
    synchronized (this) {
      replies++;
      if (reply.getResponseCase() == ProcessingResponse.ResponseCase.RESPONSE_NOT_SET) {
        if (reply.hasOverrideMessageTimeout()) {
          timerExtensions++;
        } else {
          failure = fail("empty reply");
        }
      } else {
        Owed first = owed.pollFirst();
        if (first == null) {
          failure = fail("spurious reply " + reply.getResponseCase());
        } else if (!reply.getResponseCase().name().equals(first.message().getRequestCase().name())) {
          failure = fail("reply " + reply.getResponseCase() + " to " + first.message().getRequestCase());
        } else {
          answered = first;
          nanos = System.nanoTime() - first.sentNanos();
          slowestReplyNanos = Math.max(slowestReplyNanos, nanos);
          apply(first.message(), reply);
        }
      }
      notifyAll();
    }
    if (listener != null && failure != null) {
      listener.violated(failure);
    } else if (listener != null && answered != null) {
      listener.replied(answered.message().getRequestCase(), reply, nanos);
    }
  }

  /** What Envoy does with a matched reply: the mode, the dynamic metadata, a body chunk's bytes. */
  private void apply(ProcessingRequest message, ProcessingResponse reply) {
    RequestCase kind = message.getRequestCase();
    if (reply.hasModeOverride() && (kind == RequestCase.REQUEST_HEADERS || kind == RequestCase.RESPONSE_HEADERS)) {
      mode = ReplyRules.overriddenMode(configured, reply.getModeOverride());
    }
    if (reply.hasDynamicMetadata()) {
      metadata = reply.getDynamicMetadata();
    }
    ByteString chunk = EnvoyRequests.chunk(message);
    if (chunk == null || !collectBodies) {
      return;
    }
    CommonResponse common =
        kind == RequestCase.RESPONSE_BODY ? reply.getResponseBody().getResponse() : reply.getRequestBody().getResponse();
    byte[] out =
        common.hasBodyMutation() ? ReplyRules.mutatedBody(chunk.toByteArray(), common.getBodyMutation()) : chunk.toByteArray();
    (kind == RequestCase.RESPONSE_BODY ? client : upstream).writeBytes(out);
  }

  private String fail(String what) {
    if (violation == null) {
      violation = what;
    }
    return what;
  }

  @Override
  public void onError(Throwable t) {
    synchronized (this) {
      serverClosed = true;
      fail("server closed the stream with an error: " + t);
      notifyAll();
    }
    if (listener != null) {
      listener.closed(t);
    }
  }

  @Override
  public void onCompleted() {
    synchronized (this) {
      serverClosed = true;
      notifyAll();
    }
    if (listener != null) {
      listener.closed(null);
    }
  }
}
