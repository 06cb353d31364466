package io.disaggusage.extproc.emulator.envoy;

import io.disaggusage.extproc.driver.ReplyRules;
import io.disaggusage.extproc.emulator.envoy.HeaderMutator.InvalidMutationException;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.HeaderSendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.CommonResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpTrailers;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.TrailersResponse;
import io.disaggusage.extproc.driver.EnvoyRequests;
import java.io.ByteArrayOutputStream;
import java.util.ArrayDeque;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * One direction's processor state (Envoy's {@code DecodingProcessorState} / {@code
 * EncodingProcessorState}; decoding = request, encoding = response): the state machine over its
 * headers, body and trailers — what is held, buffered or streamed, which message went to the
 * processor and which reply is awaited, with its message timer. Kept apart from the {@link
 * FilterStream}, which owns what both directions share (the ext_proc stream, the exchange's end).
 * Loop-confined.
 */
final class ProcessorState {
  enum CallbackState {
    IDLE,
    HEADERS,
    BUFFERED_BODY,
    BUFFERED_PARTIAL_BODY,
    STREAMED_BODY,
    TRAILERS
  }

  /** A reply that does not answer the message awaited. */
  static final class SpuriousReplyException extends Exception {
    SpuriousReplyException(String message) {
      super(message);
    }
  }

  private record Chunk(byte[] bytes, boolean eos) {}

  private final FilterStream filter;
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
  private final ArrayDeque<Chunk> queue = new ArrayDeque<>();
  CallbackState state = CallbackState.IDLE;
  private ScheduledFuture<?> timer;
  private boolean timerActive;
  private long timerGeneration;
  private boolean newTimeoutReceived;
  boolean attributesSent;
  boolean ended;
  boolean bodyReplaced;
  boolean partialProcessed;

  ProcessorState(FilterStream filter, boolean isRequest) {
    this.filter = filter;
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

  boolean isBuffered() {
    return bodyMode == BodySendMode.BUFFERED || bodyMode == BodySendMode.BUFFERED_PARTIAL;
  }

  // ---------------------------------------------------------------------------------------------
  // Codec events (Envoy's decodeHeaders/encodeHeaders/onData/onTrailers).

  void onHeaders(HeaderList headers, boolean endStream) {
    if (filter.finished()) {
      return;
    }
    this.headers = headers;
    headersArrived = true;
    noBody = endStream;
    if (endStream) {
      completeBody = true;
    }
    if (filter.processingComplete()) {
      resume();
      return;
    }
    boolean removeContentLength = shouldRemoveContentLength();
    if (sendHeaders) {
      ProcessingRequest.Builder msg = filter.extProc.newMessage(this);
      HttpHeaders hh =
          HttpHeaders.newBuilder().setHeaders(ExtProcStream.toHeaderMap(headers)).setEndOfStream(endStream).build();
      if (isRequest) {
        msg.setRequestHeaders(hh);
      } else {
        msg.setResponseHeaders(hh);
      }
      // Envoy serialises the message first, then strips content-length from the forwarded map.
      if (removeContentLength) {
        headers.remove("content-length");
      }
      state = CallbackState.HEADERS;
      filter.extProc.send(this, msg.build());
      return;
    }
    if (removeContentLength) {
      headers.remove("content-length");
    }
    resume();
  }

  void onData(byte[] bytes, boolean eos) {
    if (filter.finished()) {
      return;
    }
    dataSeen = true;
    if (eos) {
      completeBody = true;
    }
    if (bodyReplaced) {
      // CONTINUE_AND_REPLACE: later peer bytes are discarded; only the end is propagated.
      if (eos && headersForwarded) {
        filter.sinkData(this, new byte[0], true);
      }
      return;
    }
    if (filter.processingComplete()) {
      passData(bytes, eos);
      return;
    }
    if (state == CallbackState.HEADERS) {
      // Body data is held until the headers reply tells Envoy what to do with it.
      held = concat(held, bytes);
      return;
    }
    int bufferLimit = filter.config.bufferLimitBytes();
    switch (bodyMode) {
      case NONE -> passData(bytes, eos);
      case BUFFERED -> {
        if (held.length + bytes.length > bufferLimit) {
          filter.bufferOverflow(this);
          return;
        }
        held = concat(held, bytes);
        if (eos) {
          sendBody(held, true, CallbackState.BUFFERED_BODY);
        }
      }
      case BUFFERED_PARTIAL -> {
        if (partialProcessed) {
          passData(bytes, eos);
        } else if (state == CallbackState.BUFFERED_PARTIAL_BODY) {
          partialPending = concat(partialPending, bytes);
        } else {
          held = concat(held, bytes);
          if (eos) {
            sendBody(held, true, CallbackState.BUFFERED_BODY);
          } else if (held.length >= bufferLimit) {
            sendBody(held, false, CallbackState.BUFFERED_PARTIAL_BODY);
          }
        }
      }
      case STREAMED -> sendChunk(bytes, eos);
      default -> throw new UnsupportedOperationException(
          "FakeEnvoy does not model body mode " + bodyMode);
    }
  }

  void onTrailers(HeaderList trailers) {
    if (filter.finished()) {
      return;
    }
    this.trailers = trailers;
    trailersAvailable = true;
    boolean bodyDelivered = completeBody;
    completeBody = true;
    if (filter.processingComplete() || bodyReplaced) {
      resume();
      return;
    }
    if (state != CallbackState.IDLE) {
      return; // continues when the pending callback finishes
    }
    if (!bodyDelivered
        && dataSeen
        && (bodyMode == BodySendMode.BUFFERED
            || (bodyMode == BodySendMode.BUFFERED_PARTIAL && !partialProcessed))) {
      sendBody(held, false, CallbackState.BUFFERED_BODY);
      return;
    }
    trailersStep();
  }

  // ---------------------------------------------------------------------------------------------
  // Forwarding (continueProcessing / injectDataToFilterChain).

  /** Forwards everything that is ready and not waiting for the processor. */
  void resume() {
    if (!headersArrived || filter.finished()) {
      return;
    }
    if (!headersForwarded) {
      boolean endWithHeaders = noBody && held.length == 0 && !trailersAvailable;
      filter.sinkHeaders(this, endWithHeaders);
    }
    if (held.length > 0
        || (completeBody && !trailersAvailable && !ended && queue.isEmpty())) {
      byte[] out = held;
      held = new byte[0];
      filter.sinkData(this, out, completeBody && !trailersAvailable && queue.isEmpty());
    }
    trailersStep();
  }

  /** Sends the trailers to the processor or forwards them, once nothing is pending before them. */
  private void trailersStep() {
    if (!trailersAvailable
        || trailersForwarded
        || filter.finished()
        || state != CallbackState.IDLE
        || !queue.isEmpty()) {
      return;
    }
    if (sendTrailers && !trailersProcessed && !filter.processingComplete() && !bodyReplaced) {
      ProcessingRequest.Builder msg = filter.extProc.newMessage(this);
      HttpTrailers t = HttpTrailers.newBuilder().setTrailers(ExtProcStream.toHeaderMap(trailers)).build();
      if (isRequest) {
        msg.setRequestTrailers(t);
      } else {
        msg.setResponseTrailers(t);
      }
      state = CallbackState.TRAILERS;
      filter.extProc.send(this, msg.build());
      return;
    }
    if (!headersForwarded) {
      filter.sinkHeaders(this, false);
    }
    if (held.length > 0) {
      byte[] out = held;
      held = new byte[0];
      filter.sinkData(this, out, false);
    }
    trailersForwarded = true;
    filter.sinkTrailers(this);
  }

  private void passData(byte[] bytes, boolean eos) {
    if (!headersForwarded) {
      held = concat(held, bytes);
      return;
    }
    filter.sinkData(this, bytes, eos);
  }

  // ---------------------------------------------------------------------------------------------
  // Body messages.

  private void sendChunk(byte[] bytes, boolean eos) {
    queue.add(new Chunk(bytes, eos));
    sendBody(bytes, eos, CallbackState.STREAMED_BODY);
  }

  private void sendBody(byte[] bytes, boolean eos, CallbackState state) {
    this.state = state;
    ProcessingRequest.Builder msg = filter.extProc.newMessage(this);
    HttpBody body = EnvoyRequests.body(bytes, eos);
    if (isRequest) {
      msg.setRequestBody(body);
    } else {
      msg.setResponseBody(body);
    }
    ProcessingRequest built = msg.build();
    filter.extProc.send(this, built);
    if (eos && filter.exchange.duplicateFinalBodyMessage) {
      filter.extProc.send(this, built.toBuilder().clearProtocolConfig().clearAttributes().build());
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Replies.

  void onHeadersReply(CommonResponse common, boolean overridden)
      throws SpuriousReplyException, InvalidMutationException {
    if (state != CallbackState.HEADERS) {
      throw new SpuriousReplyException("spurious message");
    }
    boolean replace = common.getStatus() == CommonResponse.ResponseStatus.CONTINUE_AND_REPLACE;
    if (common.hasHeaderMutation()) {
      filter.mutations.applyHeaders(common.getHeaderMutation(), headers, shouldRemoveContentLength(), replace);
    }
    filter.mutations.clearRouteCache(isRequest, common);
    stopTimer();
    state = CallbackState.IDLE;
    if (overridden && filter.config.stripContentLengthOnModeOverride() && shouldRemoveContentLength()) {
      headers.remove("content-length");
    }
    if (replace) {
      if (common.hasBodyMutation()) {
        headers.remove("content-length");
        bodyReplaced = true;
        held = ReplyRules.mutatedBody(held, common.getBodyMutation());
        if (held.length > 0) {
          noBody = false;
        }
      }
      queue.clear();
      bodyMode = BodySendMode.NONE;
      sendTrailers = false;
      resume();
      return;
    }
    if (noBody) {
      resume();
      return;
    }
    if (completeBody && bodyMode != BodySendMode.NONE && dataSeen) {
      // The whole body arrived before the headers reply: one message, handled like BUFFERED.
      sendBody(held, !trailersAvailable, CallbackState.BUFFERED_BODY);
      return;
    }
    switch (bodyMode) {
      case BUFFERED -> {
        return; // headers stay held until the buffered body reply
      }
      case STREAMED -> {
        if (held.length > 0) {
          byte[] early = held;
          held = new byte[0];
          sendChunk(early, false);
        }
        state = queue.isEmpty() ? CallbackState.IDLE : CallbackState.STREAMED_BODY;
        resume();
        return;
      }
      case BUFFERED_PARTIAL -> {
        if (held.length >= filter.config.bufferLimitBytes()) {
          sendBody(held, false, CallbackState.BUFFERED_PARTIAL_BODY);
        }
        return;
      }
      case NONE -> {
        // fall through to continue
      }
      default -> throw new UnsupportedOperationException(
          "FakeEnvoy does not model body mode " + bodyMode);
    }
    if (sendTrailers && trailersAvailable) {
      trailersStep(); // headers stay held until the trailers reply
      return;
    }
    resume();
  }

  void onBodyReply(CommonResponse common) throws SpuriousReplyException, InvalidMutationException {
    if (common.hasBodyMutation() && common.getBodyMutation().hasStreamedResponse()) {
      throw new SpuriousReplyException("spurious message"); // whatever the state
    }
    switch (state) {
      case BUFFERED_BODY -> {
        applyHeldHeadersMutation(common);
        if (common.hasBodyMutation()) {
          held = filter.mutations.mutateBufferedBody(held, common.getBodyMutation(), headers, headersForwarded);
        }
        stopTimer();
        state = CallbackState.IDLE;
        filter.mutations.clearRouteCache(isRequest, common);
        resume();
      }
      case BUFFERED_PARTIAL_BODY -> {
        applyHeldHeadersMutation(common);
        if (common.hasBodyMutation()) {
          held = ReplyRules.mutatedBody(held, common.getBodyMutation());
        }
        held = concat(held, partialPending);
        partialPending = new byte[0];
        partialProcessed = true;
        stopTimer();
        state = CallbackState.IDLE;
        resume();
      }
      case STREAMED_BODY -> {
        Chunk chunk = queue.poll();
        if (chunk == null) {
          throw new SpuriousReplyException("spurious message");
        }
        byte[] out = common.hasBodyMutation() ? ReplyRules.mutatedBody(chunk.bytes(), common.getBodyMutation()) : chunk.bytes();
        stopTimer();
        state = queue.isEmpty() ? CallbackState.IDLE : CallbackState.STREAMED_BODY;
        if (out.length > 0 || chunk.eos()) {
          filter.sinkData(this, out, chunk.eos());
        }
        if (queue.isEmpty()) {
          trailersStep();
        }
      }
      default -> throw new SpuriousReplyException("spurious message");
    }
  }

  /** A body reply's header mutation applies while the headers are still held. */
  private void applyHeldHeadersMutation(CommonResponse common) throws InvalidMutationException {
    if (common.hasHeaderMutation() && !headersForwarded) {
      filter.mutations.applyHeaders(common.getHeaderMutation(), headers, shouldRemoveContentLength(), false);
    }
  }

  void onTrailersReply(TrailersResponse tr) throws SpuriousReplyException, InvalidMutationException {
    if (state != CallbackState.TRAILERS) {
      throw new SpuriousReplyException("spurious message");
    }
    if (tr.hasHeaderMutation()) {
      filter.mutations.applyHeaders(tr.getHeaderMutation(), trailers, false, false);
    }
    stopTimer();
    state = CallbackState.IDLE;
    trailersProcessed = true;
    resume();
  }

  // ---------------------------------------------------------------------------------------------
  // Processing given up.

  /** Continue unprocessed: queued data injected unmodified, held headers/bodies released. */
  void continueUnprocessed() {
    stopTimer();
    state = CallbackState.IDLE;
    if (!queue.isEmpty()) {
      ByteArrayOutputStream all = new ByteArrayOutputStream();
      boolean eos = false;
      for (Chunk c : queue) {
        all.writeBytes(c.bytes());
        eos = c.eos();
      }
      queue.clear();
      if (!headersForwarded) {
        filter.sinkHeaders(this, false);
      }
      filter.sinkData(this, all.toByteArray(), eos);
    }
    if (partialPending.length > 0) {
      held = concat(held, partialPending);
      partialPending = new byte[0];
    }
    resume();
  }

  /** Whether this direction may still send the processor a message. */
  boolean moreMessagesPossible() {
    if (state != CallbackState.IDLE || !queue.isEmpty()) {
      return true;
    }
    if (!headersArrived) {
      return sendHeaders || bodyMode != BodySendMode.NONE || sendTrailers;
    }
    if (bodyReplaced || noBody) {
      return false;
    }
    if (!completeBody && (bodyMode != BodySendMode.NONE || sendTrailers)) {
      return true;
    }
    return trailersAvailable && sendTrailers && !trailersProcessed;
  }

  // ---------------------------------------------------------------------------------------------
  // Message timer.

  void startTimer() {
    stopTimer();
    newTimeoutReceived = false;
    armTimer(filter.config.messageTimeoutMillis());
  }

  private void armTimer(long millis) {
    final long generation = ++timerGeneration;
    timerActive = true;
    timer =
        filter.envoy.timer().schedule(
            () -> filter.loop.execute(filter.guarded(() -> {
              if (timerActive && timerGeneration == generation && !filter.finished()) {
                timerActive = false;
                filter.onMessageTimeout();
              }
            })),
            millis,
            TimeUnit.MILLISECONDS);
  }

  void stopTimer() {
    timerActive = false;
    timerGeneration++;
    if (timer != null) {
      timer.cancel(false);
      timer = null;
    }
  }

  /** override_message_timeout: re-arms a running timer once per message; false if not applied. */
  boolean restartTimer(long millis) {
    if (timerActive && !newTimeoutReceived) {
      stopTimer();
      armTimer(millis);
      newTimeoutReceived = true;
      return true;
    }
    return false;
  }

  static byte[] concat(byte[] a, byte[] b) {
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
}
