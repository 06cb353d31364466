package io.disaggusage.extproc.emulator.envoy;

import com.google.protobuf.Duration;
import com.google.protobuf.Struct;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult.StreamEnd;
import io.disaggusage.extproc.emulator.envoy.HeaderMutator.InvalidMutationException;
import io.disaggusage.extproc.emulator.envoy.ProcessorState.CallbackState;
import io.disaggusage.extproc.emulator.envoy.ProcessorState.SpuriousReplyException;
import io.disaggusage.extproc.sse.ByteSearch;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.ImmediateResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.Status;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Predicate;

/**
 * The ext_proc filter instance of one HTTP exchange (Envoy's {@code Filter}): drives the downstream
 * client and the upstream, hands codec events to its decoding and encoding {@link ProcessorState}s,
 * dispatches the processor's replies to them, forwards what they release, and owns how the exchange
 * ends (timeouts, gRPC errors, local replies, resets) and the futures the {@link ExchangeHandle}
 * waits on. All state lives on {@link #loop}; gRPC callbacks, timers and the upstream/downstream
 * drivers only post to it.
 */
final class FilterStream {
  private static final String ERROR_PREFIX = "ext_proc_error";

  final FakeEnvoy envoy;
  final FilterConfig config;
  final Exchange exchange;
  final SerialExecutor loop;
  final ReplyMutations mutations;
  private final EnvoyStats stats = new EnvoyStats();
  final ProcessorState req = new ProcessorState(this, true);
  final ProcessorState resp = new ProcessorState(this, false);
  final ExtProcStream extProc = new ExtProcStream(this);
  private final ForwardedTraffic traffic;
  final PeerDrivers drivers;
  /** Dynamic metadata: preset by the exchange, merged from replies, forwarded in messages. */
  final Map<String, Struct> dynamicMetadata = new LinkedHashMap<>();

  private boolean processingComplete;
  private boolean finished;
  private boolean upstreamAbandoned;
  private boolean upstreamStarted;

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
  private final AtomicBoolean closingForMarker = new AtomicBoolean();
  private final List<Map.Entry<Integer, CompletableFuture<Void>>> replyWatchers = new CopyOnWriteArrayList<>();
  /** Processor replies whose handling on the loop is over (loop-confined). */
  private int repliesHandled;
  /** Completes once a response body message carrying end_of_stream went to the processor. */
  final CompletableFuture<Void> responseEndSent = new CompletableFuture<>();


  FilterStream(FakeEnvoy envoy, Exchange exchange) {
    this.envoy = envoy;
    this.config = new FilterConfig(envoy);
    this.exchange = exchange;
    this.loop = new SerialExecutor(envoy.pool());
    this.mutations = new ReplyMutations(envoy.mutator(), config, this::inc);
    this.traffic = new ForwardedTraffic(loop, this::finished);
    ProcessingMode mode = config.processingMode();
    req.setMode(mode);
    resp.setMode(mode);
    dynamicMetadata.putAll(exchange.presetDynamicMetadata);
    this.drivers = new PeerDrivers(this, exchange);
  }

  boolean finished() {
    return finished;
  }

  boolean processingComplete() {
    return processingComplete;
  }

  void start() {
    drivers.start();
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
    req.stopTimer();
    resp.stopTimer();
    extProc.cancel(t);
    result.completeExceptionally(t);
    requestHeadersForwarded.completeExceptionally(t);
    responseHeadersForwarded.completeExceptionally(t);
    streamOpened.completeExceptionally(t);
  }

  void bufferOverflow(ProcessorState d) {
    processingComplete = true;
    if (d.isRequest) {
      localReply(413, "request_payload_too_large", "Payload Too Large", null, OptionalInt.empty());
    } else {
      localReply(500, "response_payload_too_large", "Internal Server Error", null, OptionalInt.empty());
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Forwarding what the processor states release, to the upstream or the client.

  void sinkHeaders(ProcessorState d, boolean endStream) {
    d.headersForwarded = true;
    HeaderList snapshot = d.headers.copy();
    if (d.isRequest) {
      traffic.upstreamHeaders(snapshot);
      requestHeadersForwarded.complete(snapshot);
      maybeStartUpstream();
    } else {
      traffic.clientHeaders(snapshot);
      responseHeadersForwarded.complete(snapshot);
    }
    if (endStream) {
      sinkEnd(d);
    }
  }

  void sinkData(ProcessorState d, byte[] bytes, boolean endStream) {
    if (bytes.length > 0) {
      if (d.isRequest) {
        traffic.upstreamData(bytes);
      } else {
        byte[] snapshot = traffic.clientData(bytes);
        checkResponseRead(snapshot.length);
        checkClosingMarker(snapshot);
      }
    }
    if (endStream) {
      sinkEnd(d);
    }
  }

  void sinkTrailers(ProcessorState d) {
    traffic.trailers(d.isRequest, d.trailers.copy());
    sinkEnd(d);
  }

  /** The client has every byte its content-length announced: for it, the response is complete. */
  private void checkResponseRead(int bodyBytes) {
    if (traffic.clientHasAnnouncedBody(bodyBytes)) {
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

  private void sinkEnd(ProcessorState d) {
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
      drivers.upstreamStart.complete(null);
    }
  }

  private void maybeFinish() {
    if (resp.ended && (req.ended || upstreamAbandoned)) {
      finish();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Timeouts.

  private void onNewTimeout(Duration duration) {
    long millis = duration.getSeconds() * 1000 + duration.getNanos() / 1_000_000;
    long max = config.maxMessageTimeoutMillis();
    if (millis < 1 || millis > max) {
      inc(EnvoyStats.OVERRIDE_MESSAGE_TIMEOUT_IGNORED);
      return;
    }
    if (!req.restartTimer(millis) && !resp.restartTimer(millis)) {
      inc(EnvoyStats.OVERRIDE_MESSAGE_TIMEOUT_IGNORED);
      return;
    }
    inc(EnvoyStats.OVERRIDE_MESSAGE_TIMEOUT_RECEIVED);
  }

  void onMessageTimeout() {
    inc(EnvoyStats.MESSAGE_TIMEOUTS);
    processingComplete = true;
    extProc.close();
    if (config.failureModeAllow()) {
      inc(EnvoyStats.FAILURE_MODE_ALLOWED);
      clearAsyncState();
    } else {
      req.stopTimer();
      resp.stopTimer();
      localReply(504, ERROR_PREFIX + "_per-message_timeout_exceeded", "", null, OptionalInt.empty());
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Replies.

  void onReply(ProcessingResponse r) {
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
          config.receiveMetadata(r, dynamicMetadata);
          req.onHeadersReply(r.getRequestHeaders().getResponse(), overridden);
        }
        case RESPONSE_HEADERS -> {
          config.receiveMetadata(r, dynamicMetadata);
          resp.onHeadersReply(r.getResponseHeaders().getResponse(), overridden);
        }
        case REQUEST_BODY -> {
          config.receiveMetadata(r, dynamicMetadata);
          bufferedBodyReply = req.isBuffered();
          req.onBodyReply(r.getRequestBody().getResponse());
        }
        case RESPONSE_BODY -> {
          config.receiveMetadata(r, dynamicMetadata);
          bufferedBodyReply = resp.isBuffered();
          resp.onBodyReply(r.getResponseBody().getResponse());
        }
        case REQUEST_TRAILERS -> {
          config.receiveMetadata(r, dynamicMetadata);
          req.onTrailersReply(r.getRequestTrailers());
        }
        case RESPONSE_TRAILERS -> {
          config.receiveMetadata(r, dynamicMetadata);
          resp.onTrailersReply(r.getResponseTrailers());
        }
        case IMMEDIATE_RESPONSE -> {
          if (config.disableImmediateResponse()) {
            throw new SpuriousReplyException("unhandled immediate response due to config disabled it");
          }
          config.receiveMetadata(r, dynamicMetadata);
          processingComplete = true;
          req.stopTimer();
          resp.stopTimer();
          extProc.close();
          inc(EnvoyStats.STREAM_MSGS_RECEIVED);
          sendImmediateResponse(r.getImmediateResponse());
          return;
        }
        default -> throw new SpuriousReplyException("unhandled message");
      }
    } catch (SpuriousReplyException e) {
      inc(EnvoyStats.SPURIOUS_MSGS_RECEIVED);
      if (config.failureModeAllow() || !envoy.profile().spuriousRepliesFollowFailureMode()) {
        if (envoy.profile().spuriousRepliesFollowFailureMode()) {
          inc(EnvoyStats.FAILURE_MODE_ALLOWED);
        }
        processingComplete = true;
        extProc.close();
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

  /** Returns whether an override was applied (mode_override rules of §2.4). */
  private boolean applyModeOverride(ProcessingResponse r) {
    ProcessingMode m = config.overriddenMode(
        r, req.state == CallbackState.HEADERS || resp.state == CallbackState.HEADERS);
    if (m == null) {
      return false;
    }
    req.setMode(m);
    resp.setMode(m);
    return true;
  }

  // ---------------------------------------------------------------------------------------------
  // Stream end and failures.

  /** Continue unprocessed: queued data injected unmodified, held headers/bodies released. */
  private void clearAsyncState() {
    req.continueUnprocessed();
    resp.continueUnprocessed();
  }

  private void maybeCloseAfterLastReply(boolean bufferedBodyReply) {
    if (!envoy.profile().closesStreamAfterLastReply()
        || !extProc.isOpen()
        || processingComplete
        || finished
        || bufferedBodyReply
        || req.moreMessagesPossible()
        || resp.moreMessagesPossible()) {
      return;
    }
    extProc.close();
  }

  void onGrpcCompleted() {
    if (!extProc.endedByServer(StreamEnd.SERVER_CLOSED_OK, Status.OK)) {
      return;
    }
    if (finished || processingComplete) {
      return;
    }
    processingComplete = true;
    inc(EnvoyStats.STREAMS_CLOSED);
    clearAsyncState();
  }

  void onGrpcError(Status status) {
    if (!extProc.endedByServer(StreamEnd.SERVER_FAILED, status)) {
      return; // our own cancel
    }
    inc(EnvoyStats.STREAMS_FAILED);
    if (finished || processingComplete) {
      return;
    }
    processingComplete = true;
    if (config.failureModeAllow()) {
      inc(EnvoyStats.STREAMS_CLOSED);
      clearAsyncState();
      inc(EnvoyStats.FAILURE_MODE_ALLOWED);
    } else {
      req.stopTimer();
      resp.stopTimer();
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
    req.stopTimer();
    resp.stopTimer();
    extProc.close();
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
      int status, String details, String body, HeaderMutation mutation, OptionalInt grpcStatus) {
    if (finished) {
      return;
    }
    String cleanDetails = details.replaceAll("\\s", "_");
    byte[] bodyBytes = body.getBytes(StandardCharsets.UTF_8);
    LocalReply reply = new LocalReply(status, cleanDetails, bodyBytes, grpcStatus);
    upstreamAbandoned = !req.ended;
    boolean headersSent = traffic.localReply(reply);
    if (headersSent) {
      // The downstream response already started: Envoy can only reset the stream.
      traffic.clientReset();
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
      mutations.applyToLocalReply(mutation, h);
    }
    traffic.localResponse(h, bodyBytes);
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
    traffic.clientReset();
    upstreamAbandoned = true;
    extProc.resetByDownstream();
    finish();
  }

  private void finish() {
    if (finished) {
      return;
    }
    finished = true;
    req.stopTimer();
    resp.stopTimer();
    extProc.close();
    // Published from a follow-up loop task, so the rest of the current event (e.g. the counter
    // increments after a reply handler) is visible in the result.
    loop.execute(() -> {
      ExchangeResult r = buildResult();
      IllegalStateException notForwarded =
          new IllegalStateException("exchange " + exchange.name() + " ended: " + r);
      requestHeadersForwarded.completeExceptionally(notForwarded);
      responseHeadersForwarded.completeExceptionally(notForwarded);
      streamOpened.completeExceptionally(notForwarded);
      traffic.failWatchers(notForwarded);
      extProc.failWatchers(notForwarded);
      for (var w : replyWatchers) {
        w.getValue().completeExceptionally(notForwarded);
      }
      responseRead.complete(null);
      result.complete(r);
    });
  }

  private ExchangeResult buildResult() {
    UpstreamRequest upstream = traffic.upstream(req.ended);
    ClientResponse client = traffic.client(resp.ended);
    return new ExchangeResult(
        exchange,
        upstream,
        client,
        dynamicMetadata,
        extProc.sentSoFar(),
        extProc.receivedSoFar(),
        stats,
        extProc.streamEnd(),
        extProc.serverStatus());
  }

  void inc(String counter) {
    stats.inc(counter);
    envoy.stats().inc(counter);
  }

  // ---------------------------------------------------------------------------------------------
  // Handle support.

  CompletableFuture<byte[]> whenClientBody(Predicate<byte[]> condition) {
    return traffic.whenClientBody(condition);
  }

  CompletableFuture<List<ProcessingRequest>> whenMessagesSent(int n) {
    return extProc.whenMessagesSent(n);
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

  void replyHandled() {
    repliesHandled++;
    for (var w : replyWatchers) {
      if (repliesHandled >= w.getKey()) {
        w.getValue().complete(null);
      }
    }
  }

  byte[] clientBodySoFar() {
    return traffic.clientBodySoFar();
  }

  List<ProcessingRequest> sentSoFar() {
    return extProc.sentSoFar();
  }
}
