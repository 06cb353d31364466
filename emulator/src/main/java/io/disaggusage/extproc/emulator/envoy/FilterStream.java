package io.disaggusage.extproc.emulator.envoy;

import com.google.protobuf.Duration;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import io.disaggusage.extproc.driver.EnvoyRequests;
import io.disaggusage.extproc.driver.FilterConfigs;
import io.disaggusage.extproc.driver.ReplyRules;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult.StreamEnd;
import io.disaggusage.extproc.sse.ByteSearch;
import io.disaggusage.extproc.emulator.envoy.HeaderMutator.InvalidMutationException;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.config.core.v3.Metadata;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.HeaderSendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.BodyMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.CommonResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpTrailers;
import io.envoyproxy.envoy.service.ext_proc.v3.ImmediateResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProtocolConfiguration;
import io.envoyproxy.envoy.service.ext_proc.v3.TrailersResponse;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.MetadataUtils;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

/**
 * The ext_proc filter instance of one HTTP exchange: Envoy's {@code Filter} plus its decoding and
 * encoding {@code ProcessorState}s, the upstream and the downstream client. All state lives on
 * {@link #loop}; gRPC callbacks, timers and the upstream/downstream drivers only post to it.
 */
final class FilterStream {
  static final String ATTRIBUTES_KEY = FilterConfigs.FILTER_NAME;
  private static final String ERROR_PREFIX = "ext_proc_error";

  private enum CallbackState {
    IDLE,
    HEADERS,
    BUFFERED_BODY,
    BUFFERED_PARTIAL_BODY,
    STREAMED_BODY,
    TRAILERS
  }

  private record Chunk(byte[] bytes, boolean eos) {}

  private static final class SpuriousReplyException extends Exception {
    SpuriousReplyException(String message) {
      super(message);
    }
  }

  /** One direction's processor state (decoding = request, encoding = response). */
  private final class Dir {
    final boolean isRequest;
    boolean sendHeaders;
    boolean sendTrailers;
    BodySendMode bodyMode;
    HeaderList headers;
    boolean headersArrived;
    boolean headersForwarded;
    boolean noBody;
    boolean dataSeen;
    byte[] held = new byte[0];
    byte[] partialPending = new byte[0];
    boolean completeBody;
    boolean trailersAvailable;
    HeaderList trailers;
    boolean trailersProcessed;
    boolean trailersForwarded;
    final ArrayDeque<Chunk> queue = new ArrayDeque<>();
    CallbackState state = CallbackState.IDLE;
    ScheduledFuture<?> timer;
    boolean timerActive;
    long timerGeneration;
    boolean newTimeoutReceived;
    boolean attributesSent;
    boolean ended;
    boolean bodyReplaced;
    boolean partialProcessed;
    /** The empty last chunk was delivered with the chunk before it (see {@link #deliver}). */
    boolean endCameWithData;

    Dir(boolean isRequest) {
      this.isRequest = isRequest;
    }

    void setMode(ProcessingMode mode) {
      if (isRequest) {
        sendHeaders = mode.getRequestHeaderMode() != HeaderSendMode.SKIP;
        sendTrailers = mode.getRequestTrailerMode() == HeaderSendMode.SEND;
        bodyMode = mode.getRequestBodyMode();
      } else {
        sendHeaders = mode.getResponseHeaderMode() != HeaderSendMode.SKIP;
        sendTrailers = mode.getResponseTrailerMode() == HeaderSendMode.SEND;
        bodyMode = mode.getResponseBodyMode();
      }
    }

    boolean shouldRemoveContentLength() {
      return bodyMode == BodySendMode.STREAMED
          || bodyMode == BodySendMode.FULL_DUPLEX_STREAMED
          || bodyMode == BodySendMode.BUFFERED_PARTIAL
          || (bodyMode == BodySendMode.BUFFERED && !sendHeaders);
    }

    String name() {
      return isRequest ? "request" : "response";
    }
  }

  private final FakeEnvoy envoy;
  private final ExternalProcessor cfg;
  private final Exchange exchange;
  final SerialExecutor loop;
  private final EnvoyStats stats = new EnvoyStats();
  private final Dir req = new Dir(true);
  private final Dir resp = new Dir(false);

  private boolean processingComplete;
  private boolean finished;
  private boolean protocolConfigSent;
  private ClientCallStreamObserver<ProcessingRequest> call;
  private boolean streamDone;
  private StreamEnd streamEnd = StreamEnd.NOT_OPENED;
  private Status serverStatus;
  private final Map<String, Struct> dynamicMetadata = new LinkedHashMap<>();
  private final List<ProcessingRequest> sent = Collections.synchronizedList(new ArrayList<>());
  private final List<ProcessingResponse> received = Collections.synchronizedList(new ArrayList<>());

  // Upstream view.
  private HeaderList upstreamHeaders;
  private final ByteArrayOutputStream upstreamBody = new ByteArrayOutputStream();
  private HeaderList upstreamTrailers;
  private boolean upstreamAbandoned;
  private boolean upstreamStarted;

  // Downstream client view.
  private HeaderList clientHeaders;
  private final ByteArrayOutputStream clientBody = new ByteArrayOutputStream();
  private final List<byte[]> clientChunks = new ArrayList<>();
  private HeaderList clientTrailers;
  private boolean clientReset;
  private LocalReply localReply;

  // Futures for the handle.
  final CompletableFuture<ExchangeResult> result = new CompletableFuture<>();
  final CompletableFuture<HeaderList> requestHeadersForwarded = new CompletableFuture<>();
  final CompletableFuture<HeaderList> responseHeadersForwarded = new CompletableFuture<>();
  final CompletableFuture<Void> streamOpened = new CompletableFuture<>();
  /**
   * Completes when the client has read the whole response: for a body with a content-length, once that
   * many bytes arrived, which can be before Envoy ends the stream (the end of a body is often a message
   * of its own, waiting for the processor's reply while its data is already out); otherwise when the
   * response ends.
   */
  final CompletableFuture<Void> responseRead = new CompletableFuture<>();
  /** The client's close for {@link Exchange.Builder#clientClosesAfterReading} was scheduled. */
  private final java.util.concurrent.atomic.AtomicBoolean closingForMarker = new java.util.concurrent.atomic.AtomicBoolean();
  private final CompletableFuture<Void> upstreamStart = new CompletableFuture<>();
  private final List<Map.Entry<Predicate<byte[]>, CompletableFuture<byte[]>>> bodyWatchers =
      new CopyOnWriteArrayList<>();
  private final List<Map.Entry<Integer, CompletableFuture<List<ProcessingRequest>>>> sentWatchers =
      new CopyOnWriteArrayList<>();
  private final List<Map.Entry<Integer, CompletableFuture<Void>>> replyWatchers = new CopyOnWriteArrayList<>();
  /** Processor replies whose handling on the loop is over (loop-confined). */
  private int repliesHandled;
  /** Completes once a response body message carrying end_of_stream went to the processor. */
  final CompletableFuture<Void> responseEndSent = new CompletableFuture<>();
  /** Per response chunk, in order: completes once that chunk's codec event has run on the loop. */
  final List<CompletableFuture<Void>> responseChunksDelivered = new ArrayList<>();

  final Gates requestGates;
  final Gates responseHeaderGate;
  final Gates responseGates;
  private final List<byte[]> requestChunks;
  private final List<byte[]> responseChunks;

  FilterStream(FakeEnvoy envoy, Exchange exchange) {
    this.envoy = envoy;
    this.cfg = envoy.config();
    this.exchange = exchange;
    this.loop = new SerialExecutor(envoy.pool());
    ProcessingMode mode = cfg.getProcessingMode();
    req.setMode(mode);
    resp.setMode(mode);
    requestChunks = exchange.requestChunking.split(exchange.requestBody);
    responseChunks = exchange.responseChunking.split(exchange.responseBody);
    dynamicMetadata.putAll(exchange.presetDynamicMetadata);
    requestGates =
        new Gates(requestChunks.size() + (exchange.requestTrailers != null ? 1 : 0), exchange.gateRequestBody);
    responseHeaderGate = new Gates(1, exchange.gateResponseHeaders);
    responseGates =
        new Gates(
            responseChunks.size() + (exchange.responseTrailers != null ? 1 : 0),
            exchange.gateResponseBody);
  }

  // ---------------------------------------------------------------------------------------------
  // Drivers: the downstream client and the upstream, posting codec events to the loop.

  void start() {
    boolean reqNoBody = requestChunks.isEmpty() && exchange.requestTrailers == null;
    CompletableFuture<Void> chain =
        CompletableFuture.runAsync(
            guarded(() -> decodeHeaders(exchange.requestHeaders.copy(), reqNoBody)), loop);
    for (int i = 0; i < requestChunks.size(); i++) {
      final int idx = i;
      final boolean eos = i == requestChunks.size() - 1 && exchange.requestTrailers == null;
      chain = chain
          .thenCompose(v -> requestGates.gate(idx))
          .thenCompose(v -> delay(exchange.requestChunkDelay))
          .thenRunAsync(guarded(() -> deliver(req, requestChunks, requestGates, exchange.requestChunkDelay, idx, eos)), loop);
    }
    if (exchange.requestTrailers != null) {
      int idx = requestChunks.size();
      chain = chain
          .thenCompose(v -> requestGates.gate(idx))
          .thenRunAsync(guarded(() -> onTrailers(req, exchange.requestTrailers.copy())), loop);
    }

    boolean respNoBody = responseChunks.isEmpty() && exchange.responseTrailers == null;
    CompletableFuture<Void> rchain = upstreamStart
        .thenCompose(v -> responseHeaderGate.gate(0))
        .thenRunAsync(guarded(() -> encodeHeaders(exchange.responseHeaders.copy(), respNoBody)), loop);
    if (exchange.downstreamResetAfterResponseChunks == 0) {
      rchain = rchain.thenRunAsync(guarded(this::downstreamReset), loop);
    }
    for (int i = 0; i < responseChunks.size(); i++) {
      final int idx = i;
      final boolean eos = i == responseChunks.size() - 1 && exchange.responseTrailers == null;
      rchain = rchain
          .thenCompose(v -> responseGates.gate(idx))
          .thenCompose(v -> delay(exchange.responseChunkDelay))
          .thenRunAsync(guarded(() -> deliver(resp, responseChunks, responseGates, exchange.responseChunkDelay, idx, eos)), loop);
      responseChunksDelivered.add(rchain);
      if (exchange.downstreamResetAfterResponseChunks == idx + 1) {
        rchain = rchain.thenRunAsync(guarded(this::downstreamReset), loop);
      }
    }
    if (exchange.responseTrailers != null) {
      int idx = responseChunks.size();
      rchain.thenCompose(v -> responseGates.gate(idx))
          .thenRunAsync(guarded(() -> onTrailers(resp, exchange.responseTrailers.copy())), loop);
    }
  }

  /**
   * Delivers chunk {@code idx} as one codec event. An empty last chunk that is already there (its
   * gate open, no pause before it) comes in the same event as the chunk before it, as Envoy's codecs
   * report the end of a body read together with its last bytes: an HTTP/1 body's length reached or its
   * chunked terminator, an HTTP/2 end of stream read with the data. The two messages then go to the
   * processor back to back, before any reply to the first can arrive.
   */
  private void deliver(Dir d, List<byte[]> chunks, Gates gates, java.time.Duration pause, int idx, boolean eos) {
    int last = chunks.size() - 1;
    if (idx == last && d.endCameWithData) {
      return;
    }
    onData(d, chunks.get(idx), eos);
    boolean endFollows = idx == last - 1 && chunks.get(last).length == 0 && (d.isRequest
        ? exchange.requestTrailers == null : exchange.responseTrailers == null);
    if (endFollows && pause.isZero() && gates.gate(last).isDone()) {
      d.endCameWithData = true;
      onData(d, chunks.get(last), true);
    }
  }

  private CompletableFuture<Void> delay(java.time.Duration d) {
    if (d.isZero()) {
      return CompletableFuture.completedFuture(null);
    }
    return CompletableFuture.runAsync(
        () -> {}, CompletableFuture.delayedExecutor(d.toNanos(), TimeUnit.NANOSECONDS, envoy.pool()));
  }

  /** Wraps a loop task: harness bugs or unsupported features fail the exchange visibly. */
  Runnable guarded(Runnable task) {
    return () -> {
      try {
        task.run();
      } catch (Throwable t) {
        fail(t);
      }
    };
  }

  private void fail(Throwable t) {
    if (result.isDone()) {
      return;
    }
    finished = true;
    stopTimer(req);
    stopTimer(resp);
    if (call != null && !streamDone) {
      streamDone = true;
      call.cancel("fake envoy failed: " + t, null);
    }
    result.completeExceptionally(t);
    requestHeadersForwarded.completeExceptionally(t);
    responseHeadersForwarded.completeExceptionally(t);
    streamOpened.completeExceptionally(t);
  }

  // ---------------------------------------------------------------------------------------------
  // Codec events (Envoy's decodeHeaders/encodeHeaders/onData/onTrailers).

  private void decodeHeaders(HeaderList headers, boolean endStream) {
    onHeaders(req, headers, endStream);
  }

  private void encodeHeaders(HeaderList headers, boolean endStream) {
    if (finished) {
      return;
    }
    onHeaders(resp, headers, endStream);
  }

  private void onHeaders(Dir d, HeaderList headers, boolean endStream) {
    if (finished) {
      return;
    }
    d.headers = headers;
    d.headersArrived = true;
    d.noBody = endStream;
    if (endStream) {
      d.completeBody = true;
    }
    if (processingComplete) {
      resume(d);
      return;
    }
    boolean removeContentLength = d.shouldRemoveContentLength();
    if (d.sendHeaders) {
      ProcessingRequest.Builder msg = newMessage(d);
      HttpHeaders hh =
          HttpHeaders.newBuilder().setHeaders(toHeaderMap(headers)).setEndOfStream(endStream).build();
      if (d.isRequest) {
        msg.setRequestHeaders(hh);
      } else {
        msg.setResponseHeaders(hh);
      }
      // Envoy serialises the message first, then strips content-length from the forwarded map.
      if (removeContentLength) {
        headers.remove("content-length");
      }
      d.state = CallbackState.HEADERS;
      send(d, msg.build());
      return;
    }
    if (removeContentLength) {
      headers.remove("content-length");
    }
    resume(d);
  }

  private void onData(Dir d, byte[] bytes, boolean eos) {
    if (finished) {
      return;
    }
    d.dataSeen = true;
    if (eos) {
      d.completeBody = true;
    }
    if (d.bodyReplaced) {
      // CONTINUE_AND_REPLACE: later peer bytes are discarded; only the end is propagated.
      if (eos && d.headersForwarded) {
        sinkData(d, new byte[0], true);
      }
      return;
    }
    if (processingComplete) {
      passData(d, bytes, eos);
      return;
    }
    if (d.state == CallbackState.HEADERS) {
      // Body data is held until the headers reply tells Envoy what to do with it.
      d.held = concat(d.held, bytes);
      return;
    }
    switch (d.bodyMode) {
      case NONE -> passData(d, bytes, eos);
      case BUFFERED -> {
        if (d.held.length + bytes.length > envoy.bufferLimitBytes()) {
          bufferOverflow(d);
          return;
        }
        d.held = concat(d.held, bytes);
        if (eos) {
          sendBody(d, d.held, true, CallbackState.BUFFERED_BODY);
        }
      }
      case BUFFERED_PARTIAL -> {
        if (d.partialProcessed) {
          passData(d, bytes, eos);
        } else if (d.state == CallbackState.BUFFERED_PARTIAL_BODY) {
          d.partialPending = concat(d.partialPending, bytes);
        } else {
          d.held = concat(d.held, bytes);
          if (eos) {
            sendBody(d, d.held, true, CallbackState.BUFFERED_BODY);
          } else if (d.held.length >= envoy.bufferLimitBytes()) {
            sendBody(d, d.held, false, CallbackState.BUFFERED_PARTIAL_BODY);
          }
        }
      }
      case STREAMED -> sendChunk(d, bytes, eos);
      default -> throw new UnsupportedOperationException(
          "FakeEnvoy does not model body mode " + d.bodyMode);
    }
  }

  private void onTrailers(Dir d, HeaderList trailers) {
    if (finished) {
      return;
    }
    d.trailers = trailers;
    d.trailersAvailable = true;
    boolean bodyDelivered = d.completeBody;
    d.completeBody = true;
    if (processingComplete || d.bodyReplaced) {
      resume(d);
      return;
    }
    if (d.state != CallbackState.IDLE) {
      return; // continues when the pending callback finishes
    }
    if (!bodyDelivered
        && d.dataSeen
        && (d.bodyMode == BodySendMode.BUFFERED
            || (d.bodyMode == BodySendMode.BUFFERED_PARTIAL && !d.partialProcessed))) {
      sendBody(d, d.held, false, CallbackState.BUFFERED_BODY);
      return;
    }
    trailersStep(d);
  }

  private void bufferOverflow(Dir d) {
    processingComplete = true;
    if (d.isRequest) {
      localReply(413, "request_payload_too_large", "Payload Too Large", null, OptionalInt.empty());
    } else {
      localReply(500, "response_payload_too_large", "Internal Server Error", null, OptionalInt.empty());
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Forwarding (continueProcessing / injectDataToFilterChain).

  /** Forwards everything that is ready and not waiting for the processor. */
  private void resume(Dir d) {
    if (!d.headersArrived || finished) {
      return;
    }
    if (!d.headersForwarded) {
      boolean endWithHeaders = d.noBody && d.held.length == 0 && !d.trailersAvailable;
      sinkHeaders(d, endWithHeaders);
    }
    if (d.held.length > 0
        || (d.completeBody && !d.trailersAvailable && !d.ended && d.queue.isEmpty())) {
      byte[] out = d.held;
      d.held = new byte[0];
      sinkData(d, out, d.completeBody && !d.trailersAvailable && d.queue.isEmpty());
    }
    trailersStep(d);
  }

  /** Sends the trailers to the processor or forwards them, once nothing is pending before them. */
  private void trailersStep(Dir d) {
    if (!d.trailersAvailable
        || d.trailersForwarded
        || finished
        || d.state != CallbackState.IDLE
        || !d.queue.isEmpty()) {
      return;
    }
    if (d.sendTrailers && !d.trailersProcessed && !processingComplete && !d.bodyReplaced) {
      ProcessingRequest.Builder msg = newMessage(d);
      HttpTrailers t = HttpTrailers.newBuilder().setTrailers(toHeaderMap(d.trailers)).build();
      if (d.isRequest) {
        msg.setRequestTrailers(t);
      } else {
        msg.setResponseTrailers(t);
      }
      d.state = CallbackState.TRAILERS;
      send(d, msg.build());
      return;
    }
    if (!d.headersForwarded) {
      sinkHeaders(d, false);
    }
    if (d.held.length > 0) {
      byte[] out = d.held;
      d.held = new byte[0];
      sinkData(d, out, false);
    }
    d.trailersForwarded = true;
    if (d.isRequest) {
      upstreamTrailers = d.trailers.copy();
    } else {
      clientTrailers = d.trailers.copy();
    }
    sinkEnd(d);
  }

  private void passData(Dir d, byte[] bytes, boolean eos) {
    if (!d.headersForwarded) {
      d.held = concat(d.held, bytes);
      return;
    }
    sinkData(d, bytes, eos);
  }

  private void sinkHeaders(Dir d, boolean endStream) {
    d.headersForwarded = true;
    HeaderList snapshot = d.headers.copy();
    if (d.isRequest) {
      upstreamHeaders = snapshot;
      requestHeadersForwarded.complete(snapshot);
      maybeStartUpstream();
    } else {
      synchronized (this) {
        clientHeaders = snapshot;
      }
      responseHeadersForwarded.complete(snapshot);
    }
    if (endStream) {
      sinkEnd(d);
    }
  }

  private void sinkData(Dir d, byte[] bytes, boolean endStream) {
    if (bytes.length > 0) {
      if (d.isRequest) {
        upstreamBody.writeBytes(bytes);
      } else {
        byte[] snapshot;
        synchronized (this) {
          clientBody.writeBytes(bytes);
          clientChunks.add(bytes.clone());
          snapshot = clientBody.toByteArray();
        }
        for (var w : bodyWatchers) {
          if (!w.getValue().isDone() && w.getKey().test(snapshot)) {
            w.getValue().complete(snapshot);
          }
        }
        checkResponseRead(snapshot.length);
        checkClosingMarker(snapshot);
      }
    }
    if (endStream) {
      sinkEnd(d);
    }
  }

  /** The client has every byte its content-length announced: for it, the response is complete. */
  private void checkResponseRead(int bodyBytes) {
    if (clientHeaders != null
        && clientHeaders.contains("content-length")
        && !ClientResponse.mismatch(clientHeaders, bodyBytes)) {
      clientHasResponse();
    }
  }

  /** {@link Exchange.Builder#clientClosesAfterReading}: the marker arrived, the client hangs up. */
  private void checkClosingMarker(byte[] clientBytes) {
    byte[] marker = exchange.clientClosesAfterReading;
    if (marker != null
        && !finished
        && ByteSearch.indexOf(clientBytes, 0, clientBytes.length, marker, 0) >= 0
        && closingForMarker.compareAndSet(false, true)) {
      loop.execute(guarded(this::downstreamReset)); // after the current event, as a client's close reaches Envoy
    }
  }

  private void clientHasResponse() {
    if (responseRead.complete(null) && exchange.clientClosesAfterResponse && !finished) {
      // After the current event, as a client's close reaches Envoy.
      loop.execute(guarded(this::downstreamReset));
    }
  }

  private void sinkEnd(Dir d) {
    if (d.ended) {
      return;
    }
    d.ended = true;
    if (d.isRequest) {
      maybeStartUpstream();
    } else {
      clientHasResponse();
    }
    maybeFinish();
  }

  private void maybeStartUpstream() {
    if (upstreamStarted || upstreamAbandoned) {
      return;
    }
    boolean ready = exchange.upstreamStart == Exchange.UpstreamStart.AFTER_REQUEST_HEADERS
        ? req.headersForwarded
        : req.ended;
    if (ready) {
      upstreamStarted = true;
      upstreamStart.complete(null);
    }
  }

  private void maybeFinish() {
    if (resp.ended && (req.ended || upstreamAbandoned)) {
      finish();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Sending messages.

  private ProcessingRequest.Builder newMessage(Dir d) {
    ProcessingRequest.Builder b = ProcessingRequest.newBuilder();
    if (!protocolConfigSent) {
      protocolConfigSent = true;
      b.setProtocolConfig(
          ProtocolConfiguration.newBuilder()
              .setRequestBodyMode(req.bodyMode)
              .setResponseBodyMode(resp.bodyMode)
              .setSendBodyWithoutWaitingForHeaderResponse(
                  cfg.getSendBodyWithoutWaitingForHeaderResponse()));
    }
    b.setMetadataContext(forwardingMetadata());
    List<String> expressions =
        d.isRequest ? cfg.getRequestAttributesList() : cfg.getResponseAttributesList();
    if (!d.attributesSent && !expressions.isEmpty()) {
      d.attributesSent = true;
      b.putAttributes(ATTRIBUTES_KEY, evaluateAttributes(d, expressions));
    }
    return b;
  }

  private Metadata forwardingMetadata() {
    Metadata.Builder m = Metadata.newBuilder();
    if (cfg.hasMetadataOptions()) {
      for (String ns : cfg.getMetadataOptions().getForwardingNamespaces().getUntypedList()) {
        Struct s = dynamicMetadata.get(ns);
        if (s != null) {
          m.putFilterMetadata(ns, s);
        }
      }
    }
    return m.build();
  }

  private Struct evaluateAttributes(Dir d, List<String> expressions) {
    Map<String, Object> values = new LinkedHashMap<>();
    HeaderList rh = req.headers;
    if (rh != null) {
      rh.get(":path").ifPresent(p -> {
        values.put("request.path", p);
        int q = p.indexOf('?');
        values.put("request.url_path", q < 0 ? p : p.substring(0, q));
      });
      rh.get(":method").ifPresent(v -> values.put("request.method", v));
      rh.get(":authority").ifPresent(v -> values.put("request.host", v));
      rh.get(":scheme").ifPresent(v -> values.put("request.scheme", v));
      rh.get("x-request-id").ifPresent(v -> values.put("request.id", v));
    }
    values.putAll(exchange.requestAttributes);
    if (!d.isRequest) {
      resp.headers.get(":status").ifPresent(s -> values.put("response.code", Long.parseLong(s)));
      values.putAll(exchange.responseAttributes);
    }
    Struct.Builder s = Struct.newBuilder();
    for (String expr : expressions) {
      Object v = values.get(expr);
      if (v == null) {
        continue; // unresolvable expressions are silently omitted
      }
      Value.Builder pv = Value.newBuilder();
      if (v instanceof Boolean bool) {
        pv.setBoolValue(bool);
      } else if (v instanceof Number n) {
        pv.setNumberValue(n.doubleValue());
      } else {
        pv.setStringValue(v.toString());
      }
      s.putFields(expr, pv.build());
    }
    return s.build();
  }

  private static HeaderMap toHeaderMap(HeaderList headers) {
    HeaderMap.Builder m = HeaderMap.newBuilder();
    for (var e : headers.entries()) {
      m.addHeaders(EnvoyRequests.header(e.getKey(), e.getValue()));
    }
    return m.build();
  }

  private void sendChunk(Dir d, byte[] bytes, boolean eos) {
    d.queue.add(new Chunk(bytes, eos));
    d.state = CallbackState.STREAMED_BODY;
    ProcessingRequest msg = bodyMessage(d, bytes, eos);
    send(d, msg);
    if (eos && exchange.duplicateFinalBodyMessage) {
      send(d, msg.toBuilder().clearProtocolConfig().clearAttributes().build());
    }
  }

  private void sendBody(Dir d, byte[] bytes, boolean eos, CallbackState state) {
    d.state = state;
    ProcessingRequest msg = bodyMessage(d, bytes, eos);
    send(d, msg);
    if (eos && exchange.duplicateFinalBodyMessage) {
      send(d, msg.toBuilder().clearProtocolConfig().clearAttributes().build());
    }
  }

  private ProcessingRequest bodyMessage(Dir d, byte[] bytes, boolean eos) {
    ProcessingRequest.Builder msg = newMessage(d);
    HttpBody body = EnvoyRequests.body(bytes, eos);
    if (d.isRequest) {
      msg.setRequestBody(body);
    } else {
      msg.setResponseBody(body);
    }
    return msg.build();
  }

  private void send(Dir d, ProcessingRequest msg) {
    if (call == null) {
      openStream();
    }
    if (streamDone) {
      throw new IllegalStateException(
          "FakeEnvoy bug: message needed after the ext_proc stream was closed: " + msg.getRequestCase());
    }
    sent.add(msg);
    stats.inc(EnvoyStats.STREAM_MSGS_SENT);
    envoy.stats().inc(EnvoyStats.STREAM_MSGS_SENT);
    call.onNext(msg);
    startTimer(d);
    if (msg.hasResponseBody() && msg.getResponseBody().getEndOfStream()) {
      responseEndSent.complete(null);
    }
    int n = sent.size();
    for (var w : sentWatchers) {
      if (n >= w.getKey()) {
        w.getValue().complete(List.copyOf(sent));
      }
    }
  }

  private void openStream() {
    inc(EnvoyStats.STREAMS_STARTED);
    io.grpc.Metadata md = new io.grpc.Metadata();
    Map<String, String> initial = new LinkedHashMap<>();
    if (cfg.hasGrpcService()) {
      for (HeaderValue hv : cfg.getGrpcService().getInitialMetadataList()) {
        initial.put(
            hv.getKey().toLowerCase(java.util.Locale.ROOT),
            hv.getRawValue().isEmpty() ? hv.getValue() : hv.getRawValue().toStringUtf8());
      }
    }
    exchange.grpcInitialMetadata.forEach((k, v) -> initial.put(k.toLowerCase(java.util.Locale.ROOT), v));
    initial.forEach(
        (k, v) -> md.put(io.grpc.Metadata.Key.of(k, io.grpc.Metadata.ASCII_STRING_MARSHALLER), v));
    String authority =
        cfg.hasGrpcService() && cfg.getGrpcService().hasEnvoyGrpc()
            ? (cfg.getGrpcService().getEnvoyGrpc().getAuthority().isEmpty()
                ? cfg.getGrpcService().getEnvoyGrpc().getClusterName()
                : cfg.getGrpcService().getEnvoyGrpc().getAuthority())
            : "";
    Channel channel = envoy.channel();
    ExternalProcessorGrpc.ExternalProcessorStub stub =
        ExternalProcessorGrpc.newStub(channel)
            .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(md), authorityInterceptor(authority));
    streamEnd = StreamEnd.CLOSED_BY_ENVOY;
    stub.process(
        new ClientResponseObserver<ProcessingRequest, ProcessingResponse>() {
          @Override
          public void beforeStart(ClientCallStreamObserver<ProcessingRequest> requestStream) {
            call = requestStream;
          }

          @Override
          public void onNext(ProcessingResponse value) {
            received.add(value);
            loop.execute(() -> {
              guarded(() -> onReply(value)).run();
              replyHandled();
            });
          }

          @Override
          public void onError(Throwable t) {
            Status s = Status.fromThrowable(t);
            loop.execute(guarded(() -> onGrpcError(s)));
          }

          @Override
          public void onCompleted() {
            loop.execute(guarded(FilterStream.this::onGrpcCompleted));
          }
        });
    streamOpened.complete(null);
  }

  private static ClientInterceptor authorityInterceptor(String authority) {
    return new ClientInterceptor() {
      @Override
      public <Q, R> ClientCall<Q, R> interceptCall(
          MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
        return next.newCall(method, authority.isEmpty() ? options : options.withAuthority(authority));
      }
    };
  }

  // ---------------------------------------------------------------------------------------------
  // Timers.

  private void startTimer(Dir d) {
    stopTimer(d);
    d.newTimeoutReceived = false;
    armTimer(d, envoy.messageTimeoutMillis());
  }

  private void armTimer(Dir d, long millis) {
    final long generation = ++d.timerGeneration;
    d.timerActive = true;
    d.timer =
        envoy.timer().schedule(
            () -> loop.execute(guarded(() -> {
              if (d.timerActive && d.timerGeneration == generation && !finished) {
                d.timerActive = false;
                onMessageTimeout();
              }
            })),
            millis,
            TimeUnit.MILLISECONDS);
  }

  private void stopTimer(Dir d) {
    d.timerActive = false;
    d.timerGeneration++;
    if (d.timer != null) {
      d.timer.cancel(false);
      d.timer = null;
    }
  }

  private boolean restartTimer(Dir d, long millis) {
    if (d.timerActive && !d.newTimeoutReceived) {
      stopTimer(d);
      armTimer(d, millis);
      d.newTimeoutReceived = true;
      return true;
    }
    return false;
  }

  private void onNewTimeout(Duration duration) {
    long millis = duration.getSeconds() * 1000 + duration.getNanos() / 1_000_000;
    long max = envoy.maxMessageTimeoutMillis();
    if (millis < 1 || millis > max) {
      inc(EnvoyStats.OVERRIDE_MESSAGE_TIMEOUT_IGNORED);
      return;
    }
    if (!restartTimer(req, millis) && !restartTimer(resp, millis)) {
      inc(EnvoyStats.OVERRIDE_MESSAGE_TIMEOUT_IGNORED);
      return;
    }
    inc(EnvoyStats.OVERRIDE_MESSAGE_TIMEOUT_RECEIVED);
  }

  private void onMessageTimeout() {
    inc(EnvoyStats.MESSAGE_TIMEOUTS);
    processingComplete = true;
    closeStream();
    if (cfg.getFailureModeAllow()) {
      inc(EnvoyStats.FAILURE_MODE_ALLOWED);
      clearAsyncState();
    } else {
      stopTimer(req);
      stopTimer(resp);
      localReply(504, ERROR_PREFIX + "_per-message_timeout_exceeded", "", null, OptionalInt.empty());
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Replies.

  private void onReply(ProcessingResponse r) {
    if (finished || processingComplete) {
      return;
    }
    if (r.hasOverrideMessageTimeout()) {
      onNewTimeout(r.getOverrideMessageTimeout());
      return;
    }
    boolean overridden = applyModeOverride(r);
    boolean bufferedBodyReply = false;
    try {
      switch (r.getResponseCase()) {
        case REQUEST_HEADERS -> {
          setDynamicMetadata(r);
          handleHeaders(req, r.getRequestHeaders().getResponse(), overridden);
        }
        case RESPONSE_HEADERS -> {
          setDynamicMetadata(r);
          handleHeaders(resp, r.getResponseHeaders().getResponse(), overridden);
        }
        case REQUEST_BODY -> {
          setDynamicMetadata(r);
          bufferedBodyReply = isBuffered(req);
          handleBody(req, r.getRequestBody().getResponse());
        }
        case RESPONSE_BODY -> {
          setDynamicMetadata(r);
          bufferedBodyReply = isBuffered(resp);
          handleBody(resp, r.getResponseBody().getResponse());
        }
        case REQUEST_TRAILERS -> {
          setDynamicMetadata(r);
          handleTrailers(req, r.getRequestTrailers());
        }
        case RESPONSE_TRAILERS -> {
          setDynamicMetadata(r);
          handleTrailers(resp, r.getResponseTrailers());
        }
        case IMMEDIATE_RESPONSE -> {
          if (cfg.getDisableImmediateResponse()) {
            throw new SpuriousReplyException("unhandled immediate response due to config disabled it");
          }
          setDynamicMetadata(r);
          processingComplete = true;
          stopTimer(req);
          stopTimer(resp);
          closeStream();
          inc(EnvoyStats.STREAM_MSGS_RECEIVED);
          sendImmediateResponse(r.getImmediateResponse());
          return;
        }
        default -> throw new SpuriousReplyException("unhandled message");
      }
    } catch (SpuriousReplyException e) {
      inc(EnvoyStats.SPURIOUS_MSGS_RECEIVED);
      if (cfg.getFailureModeAllow() || !envoy.profile().spuriousRepliesFollowFailureMode()) {
        if (envoy.profile().spuriousRepliesFollowFailureMode()) {
          inc(EnvoyStats.FAILURE_MODE_ALLOWED);
        }
        processingComplete = true;
        closeStream();
        clearAsyncState();
      } else {
        errorLocalReply(e.getMessage());
      }
      return;
    } catch (InvalidMutationException e) {
      inc(EnvoyStats.STREAM_MSGS_RECEIVED);
      errorLocalReply(e.getMessage());
      return;
    }
    inc(EnvoyStats.STREAM_MSGS_RECEIVED);
    maybeCloseAfterLastReply(bufferedBodyReply);
  }

  private static boolean isBuffered(Dir d) {
    return d.bodyMode == BodySendMode.BUFFERED || d.bodyMode == BodySendMode.BUFFERED_PARTIAL;
  }

  /** Returns whether an override was applied (mode_override rules of §2.4). */
  private boolean applyModeOverride(ProcessingResponse r) {
    ProcessingMode configured = cfg.getProcessingMode();
    if (!r.hasModeOverride()
        || !cfg.getAllowModeOverride()
        || cfg.getSendBodyWithoutWaitingForHeaderResponse()
        || configured.getRequestBodyMode() == BodySendMode.FULL_DUPLEX_STREAMED
        || configured.getResponseBodyMode() == BodySendMode.FULL_DUPLEX_STREAMED
        || (req.state != CallbackState.HEADERS && resp.state != CallbackState.HEADERS)) {
      return false;
    }
    ProcessingMode m = ReplyRules.overriddenMode(configured, r.getModeOverride());
    if (cfg.getAllowedOverrideModesCount() > 0) {
      boolean allowed = cfg.getAllowedOverrideModesList().stream().anyMatch(a ->
          m.getRequestBodyMode() == a.getRequestBodyMode()
              && m.getRequestTrailerMode() == a.getRequestTrailerMode()
              && m.getResponseHeaderMode() == a.getResponseHeaderMode()
              && m.getResponseBodyMode() == a.getResponseBodyMode()
              && m.getResponseTrailerMode() == a.getResponseTrailerMode());
      if (!allowed) {
        return false;
      }
    }
    if (m.getRequestBodyMode() == BodySendMode.FULL_DUPLEX_STREAMED
        || m.getResponseBodyMode() == BodySendMode.FULL_DUPLEX_STREAMED) {
      throw new UnsupportedOperationException(
          "FakeEnvoy does not model FULL_DUPLEX_STREAMED (requested via mode_override)");
    }
    req.setMode(m);
    resp.setMode(m);
    return true;
  }

  private void setDynamicMetadata(ProcessingResponse r) {
    if (!r.hasDynamicMetadata() || !cfg.hasMetadataOptions()) {
      return;
    }
    List<String> receiving = cfg.getMetadataOptions().getReceivingNamespaces().getUntypedList();
    for (var e : r.getDynamicMetadata().getFieldsMap().entrySet()) {
      if (receiving.contains(e.getKey())) {
        Struct incoming = e.getValue().getStructValue();
        dynamicMetadata.merge(e.getKey(), incoming, (a, b) -> a.toBuilder().mergeFrom(b).build());
      }
    }
  }

  private void handleHeaders(Dir d, CommonResponse common, boolean overridden)
      throws SpuriousReplyException, InvalidMutationException {
    if (d.state != CallbackState.HEADERS) {
      throw new SpuriousReplyException("spurious message");
    }
    boolean replace = common.getStatus() == CommonResponse.ResponseStatus.CONTINUE_AND_REPLACE;
    if (common.hasHeaderMutation()) {
      envoy.mutator().apply(
          common.getHeaderMutation(), d.headers, d.shouldRemoveContentLength(), replace, this::rejected);
    }
    clearRouteCache(d, common);
    stopTimer(d);
    d.state = CallbackState.IDLE;
    if (overridden && envoy.stripContentLengthOnModeOverride() && d.shouldRemoveContentLength()) {
      d.headers.remove("content-length");
    }
    if (replace) {
      if (common.hasBodyMutation()) {
        d.headers.remove("content-length");
        d.bodyReplaced = true;
        d.held = ReplyRules.mutatedBody(d.held, common.getBodyMutation());
        if (d.held.length > 0) {
          d.noBody = false;
        }
      }
      d.queue.clear();
      d.bodyMode = BodySendMode.NONE;
      d.sendTrailers = false;
      resume(d);
      return;
    }
    if (d.noBody) {
      resume(d);
      return;
    }
    if (d.completeBody && d.bodyMode != BodySendMode.NONE && d.dataSeen) {
      // The whole body arrived before the headers reply: one message, handled like BUFFERED.
      sendBody(d, d.held, !d.trailersAvailable, CallbackState.BUFFERED_BODY);
      return;
    }
    switch (d.bodyMode) {
      case BUFFERED -> {
        return; // headers stay held until the buffered body reply
      }
      case STREAMED -> {
        if (d.held.length > 0) {
          byte[] early = d.held;
          d.held = new byte[0];
          sendChunk(d, early, false);
        }
        d.state = d.queue.isEmpty() ? CallbackState.IDLE : CallbackState.STREAMED_BODY;
        resume(d);
        return;
      }
      case BUFFERED_PARTIAL -> {
        if (d.held.length >= envoy.bufferLimitBytes()) {
          sendBody(d, d.held, false, CallbackState.BUFFERED_PARTIAL_BODY);
        }
        return;
      }
      case NONE -> {
        // fall through to continue
      }
      default -> throw new UnsupportedOperationException(
          "FakeEnvoy does not model body mode " + d.bodyMode);
    }
    if (d.sendTrailers && d.trailersAvailable) {
      trailersStep(d); // headers stay held until the trailers reply
      return;
    }
    resume(d);
  }

  private void handleBody(Dir d, CommonResponse common)
      throws SpuriousReplyException, InvalidMutationException {
    boolean streamedResponse =
        common.hasBodyMutation() && common.getBodyMutation().hasStreamedResponse();
    switch (d.state) {
      case BUFFERED_BODY -> {
        if (streamedResponse) {
          throw new SpuriousReplyException("spurious message");
        }
        if (common.hasHeaderMutation() && !d.headersForwarded) {
          envoy.mutator().apply(
              common.getHeaderMutation(), d.headers, d.shouldRemoveContentLength(), false, this::rejected);
        }
        if (common.hasBodyMutation()) {
          if (!d.headersForwarded && d.headers.contains("content-length")) {
            long declared;
            try {
              declared = Long.parseLong(d.headers.get("content-length").orElseThrow().trim());
            } catch (NumberFormatException e) {
              declared = -1;
            }
            if (declared >= 0 && declared != mutationLength(common.getBodyMutation())) {
              throw new InvalidMutationException(
                  "mismatch between content length and the length of the mutated body");
            }
          }
          d.held = ReplyRules.mutatedBody(d.held, common.getBodyMutation());
        }
        stopTimer(d);
        d.state = CallbackState.IDLE;
        clearRouteCache(d, common);
        resume(d);
      }
      case BUFFERED_PARTIAL_BODY -> {
        if (streamedResponse) {
          throw new SpuriousReplyException("spurious message");
        }
        if (common.hasHeaderMutation() && !d.headersForwarded) {
          envoy.mutator().apply(
              common.getHeaderMutation(), d.headers, d.shouldRemoveContentLength(), false, this::rejected);
        }
        if (common.hasBodyMutation()) {
          d.held = ReplyRules.mutatedBody(d.held, common.getBodyMutation());
        }
        d.held = concat(d.held, d.partialPending);
        d.partialPending = new byte[0];
        d.partialProcessed = true;
        stopTimer(d);
        d.state = CallbackState.IDLE;
        resume(d);
      }
      case STREAMED_BODY -> {
        if (streamedResponse) {
          throw new SpuriousReplyException("spurious message");
        }
        Chunk chunk = d.queue.poll();
        if (chunk == null) {
          throw new SpuriousReplyException("spurious message");
        }
        byte[] out = common.hasBodyMutation() ? ReplyRules.mutatedBody(chunk.bytes(), common.getBodyMutation()) : chunk.bytes();
        stopTimer(d);
        d.state = d.queue.isEmpty() ? CallbackState.IDLE : CallbackState.STREAMED_BODY;
        if (out.length > 0 || chunk.eos()) {
          sinkData(d, out, chunk.eos());
        }
        if (d.queue.isEmpty()) {
          trailersStep(d);
        }
      }
      default -> throw new SpuriousReplyException("spurious message");
    }
  }

  private void handleTrailers(Dir d, TrailersResponse tr)
      throws SpuriousReplyException, InvalidMutationException {
    if (d.state != CallbackState.TRAILERS) {
      throw new SpuriousReplyException("spurious message");
    }
    if (tr.hasHeaderMutation()) {
      envoy.mutator().apply(tr.getHeaderMutation(), d.trailers, false, false, this::rejected);
    }
    stopTimer(d);
    d.state = CallbackState.IDLE;
    d.trailersProcessed = true;
    resume(d);
  }

  private void clearRouteCache(Dir d, CommonResponse common) {
    if (!d.isRequest) {
      return;
    }
    if (!common.hasHeaderMutation()) {
      if (common.getClearRouteCache()) {
        inc(EnvoyStats.CLEAR_ROUTE_CACHE_IGNORED);
      }
      return;
    }
    if (common.getClearRouteCache()
        && (cfg.getDisableClearRouteCache()
            || cfg.getRouteCacheAction() == ExternalProcessor.RouteCacheAction.RETAIN)) {
      inc(EnvoyStats.CLEAR_ROUTE_CACHE_DISABLED);
    }
  }

  private static long mutationLength(BodyMutation m) {
    return m.getMutationCase() == BodyMutation.MutationCase.BODY ? m.getBody().size() : 0;
  }

  private void rejected() {
    inc(EnvoyStats.REJECTED_HEADER_MUTATIONS);
  }

  // ---------------------------------------------------------------------------------------------
  // Stream end and failures.

  /** Continue unprocessed: queued data injected unmodified, held headers/bodies released. */
  private void clearAsyncState() {
    for (Dir d : List.of(req, resp)) {
      stopTimer(d);
      d.state = CallbackState.IDLE;
      if (!d.queue.isEmpty()) {
        ByteArrayOutputStream all = new ByteArrayOutputStream();
        boolean eos = false;
        for (Chunk c : d.queue) {
          all.writeBytes(c.bytes());
          eos = c.eos();
        }
        d.queue.clear();
        if (!d.headersForwarded) {
          sinkHeaders(d, false);
        }
        sinkData(d, all.toByteArray(), eos);
      }
      if (d.partialPending.length > 0) {
        d.held = concat(d.held, d.partialPending);
        d.partialPending = new byte[0];
      }
      resume(d);
    }
  }

  private void maybeCloseAfterLastReply(boolean bufferedBodyReply) {
    if (!envoy.profile().closesStreamAfterLastReply()
        || call == null
        || streamDone
        || processingComplete
        || finished
        || bufferedBodyReply
        || moreMessagesPossible()) {
      return;
    }
    closeStream();
  }

  private boolean moreMessagesPossible() {
    for (Dir d : List.of(req, resp)) {
      if (d.state != CallbackState.IDLE || !d.queue.isEmpty()) {
        return true;
      }
      if (!d.headersArrived) {
        if (d.sendHeaders || d.bodyMode != BodySendMode.NONE || d.sendTrailers) {
          return true;
        }
        continue;
      }
      if (d.bodyReplaced || d.noBody) {
        continue;
      }
      if (!d.completeBody && (d.bodyMode != BodySendMode.NONE || d.sendTrailers)) {
        return true;
      }
      if (d.trailersAvailable && d.sendTrailers && !d.trailersProcessed) {
        return true;
      }
    }
    return false;
  }

  private void closeStream() {
    if (call == null || streamDone) {
      return;
    }
    streamDone = true;
    streamEnd = StreamEnd.CLOSED_BY_ENVOY;
    inc(EnvoyStats.STREAMS_CLOSED);
    halfCloseAndCancel("envoy closed the ext_proc stream");
  }

  /** How Envoy ends an ext_proc stream, whatever the reason: a half-close, then a reset. */
  private void halfCloseAndCancel(String reason) {
    try {
      call.onCompleted();
    } catch (RuntimeException ignored) {
      // the call may already be closed by the transport
    }
    call.cancel(reason, null);
  }

  private void onGrpcCompleted() {
    if (streamDone) {
      return;
    }
    streamDone = true;
    streamEnd = StreamEnd.SERVER_CLOSED_OK;
    serverStatus = Status.OK;
    if (finished || processingComplete) {
      return;
    }
    processingComplete = true;
    inc(EnvoyStats.STREAMS_CLOSED);
    clearAsyncState();
  }

  private void onGrpcError(Status status) {
    if (streamDone) {
      return; // our own cancel
    }
    streamDone = true;
    streamEnd = StreamEnd.SERVER_FAILED;
    serverStatus = status;
    inc(EnvoyStats.STREAMS_FAILED);
    if (finished || processingComplete) {
      return;
    }
    processingComplete = true;
    if (cfg.getFailureModeAllow()) {
      inc(EnvoyStats.STREAMS_CLOSED);
      clearAsyncState();
      inc(EnvoyStats.FAILURE_MODE_ALLOWED);
    } else {
      stopTimer(req);
      stopTimer(resp);
      String message = status.getDescription() == null ? "" : status.getDescription();
      localReply(
          envoy.statusOnError(),
          ERROR_PREFIX + "_gRPC_error_" + status.getCode().value() + "{" + message + "}",
          "",
          null,
          OptionalInt.empty());
    }
  }

  private void errorLocalReply(String details) {
    processingComplete = true;
    stopTimer(req);
    stopTimer(resp);
    closeStream();
    localReply(envoy.statusOnError(), details, "", null, OptionalInt.empty());
  }

  private void sendImmediateResponse(ImmediateResponse ir) {
    int status = ir.hasStatus() ? ir.getStatus().getCodeValue() : 200;
    if (status < 200) {
      status = 200;
    }
    OptionalInt grpc = ir.hasGrpcStatus() ? OptionalInt.of(ir.getGrpcStatus().getStatus()) : OptionalInt.empty();
    localReply(
        status,
        ir.getDetails(),
        ir.getBody().toStringUtf8(),
        ir.hasHeaders() ? ir.getHeaders() : null,
        grpc);
  }

  private void localReply(
      int status,
      String details,
      String body,
      io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation mutation,
      OptionalInt grpcStatus) {
    if (finished) {
      return;
    }
    String cleanDetails = details.replaceAll("\\s", "_");
    byte[] bodyBytes = body.getBytes(StandardCharsets.UTF_8);
    LocalReply reply = new LocalReply(status, cleanDetails, bodyBytes, grpcStatus);
    upstreamAbandoned = !req.ended;
    boolean headersSent;
    synchronized (this) {
      headersSent = clientHeaders != null;
      localReply = reply;
    }
    if (headersSent) {
      // The downstream response already started: Envoy can only reset the stream.
      clientReset = true;
      finish();
      return;
    }
    HeaderList h = new HeaderList().add(":status", Integer.toString(status));
    if (bodyBytes.length > 0) {
      h.add("content-length", Integer.toString(bodyBytes.length));
      h.add("content-type", "text/plain");
    }
    boolean grpcRequest = req.headers != null
        && req.headers.get("content-type").map(c -> c.startsWith("application/grpc")).orElse(false);
    if (grpcRequest && grpcStatus.isPresent()) {
      h.add("grpc-status", Integer.toString(grpcStatus.getAsInt()));
    }
    if (mutation != null) {
      envoy.mutator().applyLenient(mutation, h, this::rejected);
    }
    synchronized (this) {
      clientHeaders = h;
      clientBody.writeBytes(bodyBytes);
      if (bodyBytes.length > 0) {
        clientChunks.add(bodyBytes.clone());
      }
    }
    resp.ended = true;
    responseHeadersForwarded.complete(h.copy());
    finish();
  }

  /**
   * The client hung up. Envoy ends the ext_proc stream as on its message timeout: it half-closes, then
   * cancels (measured with Envoy 1.36 and 1.40), so the stream's end alone does not tell the processor
   * which it was.
   */
  void downstreamReset() {
    if (finished) {
      return;
    }
    clientReset = true;
    upstreamAbandoned = true;
    if (call != null && !streamDone) {
      streamDone = true;
      streamEnd = StreamEnd.RESET_BY_DOWNSTREAM;
      halfCloseAndCancel("downstream reset");
    }
    finish();
  }

  private void finish() {
    if (finished) {
      return;
    }
    finished = true;
    stopTimer(req);
    stopTimer(resp);
    closeStream();
    // Published from a follow-up loop task, so the rest of the current event (e.g. the counter
    // increments after a reply handler) is visible in the result.
    loop.execute(() -> {
      ExchangeResult r = buildResult();
      IllegalStateException notForwarded =
          new IllegalStateException("exchange " + exchange.name() + " ended: " + r);
      requestHeadersForwarded.completeExceptionally(notForwarded);
      responseHeadersForwarded.completeExceptionally(notForwarded);
      streamOpened.completeExceptionally(notForwarded);
      for (var w : bodyWatchers) {
        w.getValue().completeExceptionally(notForwarded);
      }
      for (var w : sentWatchers) {
        w.getValue().completeExceptionally(notForwarded);
      }
      for (var w : replyWatchers) {
        w.getValue().completeExceptionally(notForwarded);
      }
      responseRead.complete(null);
      result.complete(r);
    });
  }

  private ExchangeResult buildResult() {
    UpstreamRequest upstream = new UpstreamRequest(
        upstreamHeaders != null,
        upstreamHeaders,
        upstreamBody.toByteArray(),
        upstreamTrailers,
        req.ended && upstreamHeaders != null);
    ClientResponse client;
    synchronized (this) {
      int status = clientHeaders == null
          ? 0
          : clientHeaders.get(":status").map(Integer::parseInt).orElse(0);
      client = new ClientResponse(
          status,
          clientHeaders,
          clientBody.toByteArray(),
          List.copyOf(clientChunks),
          clientTrailers,
          resp.ended && !clientReset,
          clientReset,
          Optional.ofNullable(localReply));
    }
    return new ExchangeResult(
        exchange, upstream, client, dynamicMetadata, List.copyOf(sent), List.copyOf(received), stats, streamEnd, serverStatus);
  }

  private void inc(String counter) {
    stats.inc(counter);
    envoy.stats().inc(counter);
  }

  private static byte[] concat(byte[] a, byte[] b) {
    if (b.length == 0) {
      return a;
    }
    if (a.length == 0) {
      return b.clone();
    }
    byte[] out = new byte[a.length + b.length];
    System.arraycopy(a, 0, out, 0, a.length);
    System.arraycopy(b, 0, out, a.length, b.length);
    return out;
  }

  // ---------------------------------------------------------------------------------------------
  // Handle support.

  CompletableFuture<byte[]> whenClientBody(Predicate<byte[]> condition) {
    CompletableFuture<byte[]> f = new CompletableFuture<>();
    bodyWatchers.add(Map.entry(condition, f));
    loop.execute(() -> {
      byte[] snapshot;
      synchronized (this) {
        snapshot = clientBody.toByteArray();
      }
      if (condition.test(snapshot)) {
        f.complete(snapshot);
      } else if (finished) {
        f.completeExceptionally(new IllegalStateException("exchange ended before the condition held"));
      }
    });
    return f;
  }

  CompletableFuture<List<ProcessingRequest>> whenMessagesSent(int n) {
    CompletableFuture<List<ProcessingRequest>> f = new CompletableFuture<>();
    sentWatchers.add(Map.entry(n, f));
    loop.execute(() -> {
      if (sent.size() >= n) {
        f.complete(List.copyOf(sent));
      } else if (finished) {
        f.completeExceptionally(new IllegalStateException("exchange ended after " + sent.size() + " messages"));
      }
    });
    return f;
  }

  /** Completes once {@code n} processor replies have been handled on the loop. */
  CompletableFuture<Void> whenRepliesHandled(int n) {
    CompletableFuture<Void> f = new CompletableFuture<>();
    replyWatchers.add(Map.entry(n, f));
    loop.execute(() -> {
      if (repliesHandled >= n) {
        f.complete(null);
      } else if (finished) {
        f.completeExceptionally(new IllegalStateException("exchange ended after " + repliesHandled + " replies"));
      }
    });
    return f;
  }

  private void replyHandled() {
    repliesHandled++;
    for (var w : replyWatchers) {
      if (repliesHandled >= w.getKey()) {
        w.getValue().complete(null);
      }
    }
  }

  synchronized byte[] clientBodySoFar() {
    return clientBody.toByteArray();
  }

  List<ProcessingRequest> sentSoFar() {
    synchronized (sent) {
      return List.copyOf(sent);
    }
  }
}
