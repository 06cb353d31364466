package io.disaggusage.extproc.stream;

import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.rewrite.ResponseProcessors;
import io.disaggusage.extproc.metrics.Metrics;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.stub.StreamObserver;

/**
 * The state machine of one ext_proc stream, i.e. one HTTP exchange through Envoy, and only the loop:
 * it owns the stream's lifecycle (open, reset, completed), moves each of Envoy's messages to the object
 * that answers it, and fails the exchange open. The request's messages go to its {@link RequestSide},
 * which reads and classifies the request; at the response headers the stream chooses the response's
 * {@link Leg} from what the request side decided, and hands it the response body. Replies go out
 * through a {@link ReplyQueue}, one per message, in the order the messages came. Nothing here blocks:
 * store and timer results arrive as callbacks, which the legs run through {@link #resume}. All state
 * is guarded by this object's monitor.
 *
 * <p>On any internal error the exchange is let through unmodified (behaviour.md §6): bytes held back
 * are given back in the next reply and Envoy is left to continue without the service.
 *
 * <p>When the outcome is reported, the logger {@value #SUMMARY_LOGGER} writes one DEBUG line for the
 * exchange ({@link ExchangeRecord}). Never body bytes.
 */
final class ExchangeStream implements StreamObserver<ProcessingRequest>, Leg.Host, ReplyQueue.Listener {
  /** The logger of the per-exchange summary lines (DEBUG). */
  static final String SUMMARY_LOGGER = "io.disaggusage.extproc.exchanges";

  private final ExchangeServices services;
  private final StreamObserver<ProcessingResponse> out;
  private final ExchangeRecord record;
  private final ReplyQueue replies;
  /** What is done with the request: decided once, handed to the leg at the response headers. */
  private final RequestSide requestSide;
  /** What is done with the response body: nothing until the response headers choose otherwise. */
  private Leg leg;
  private boolean responseEnded;

  ExchangeStream(ExchangeServices services, StreamObserver<ProcessingResponse> out) {
    this.services = services;
    this.out = out;
    EnvoyTimers timers = new EnvoyTimers(services.config().grpc().envoyMessageTimeout());
    this.record = new ExchangeRecord(services.metrics(), timers);
    this.replies = new ReplyQueue(out, this, timers);
    this.requestSide = new RequestSide(services, replies, record);
    this.leg = new PassThroughLeg(replies, record);
    services.metrics().streamOpened();
  }

  @Override
  public synchronized void onNext(ProcessingRequest request) {
    if (replies.closed()) {
      return;
    }
    long started = System.nanoTime();
    ReplyQueue.Slot slot = null;
    try {
      switch (request.getRequestCase()) {
        case REQUEST_HEADERS -> requestSide.onHeaders(request, slot = replies.open(request));
        case REQUEST_BODY -> {
          if (!requestSide.ended()) {
            requestSide.onBody(request.getRequestBody(), slot = replies.open(request));
          }
        }
        case REQUEST_TRAILERS -> replies.complete(slot = replies.open(request), EnvoyMessages.trailers(true));
        case RESPONSE_HEADERS -> onResponseHeaders(request.getResponseHeaders(), slot = replies.open(request));
        case RESPONSE_BODY -> {
          if (!responseEnded) {
            onResponseBody(request.getResponseBody(), slot = replies.open(request));
          }
        }
        case RESPONSE_TRAILERS -> replies.complete(slot = replies.open(request), EnvoyMessages.trailers(false));
        default -> {} // nothing Envoy expects an answer to
      }
    } catch (RuntimeException e) {
      failOpen(e, request, slot);
    }
    services.metrics().processed(messageKind(request), System.nanoTime() - started);
  }

  private static Metrics.Message messageKind(ProcessingRequest request) {
    return switch (request.getRequestCase()) {
      case REQUEST_HEADERS -> Metrics.Message.REQUEST_HEADERS;
      case REQUEST_BODY -> Metrics.Message.REQUEST_BODY;
      case RESPONSE_HEADERS -> Metrics.Message.RESPONSE_HEADERS;
      case RESPONSE_BODY -> Metrics.Message.RESPONSE_BODY;
      default -> Metrics.Message.OTHER;
    };
  }

  @Override
  public synchronized void onError(Throwable t) {
    // Envoy reset the stream: normal at the end of every exchange (CANCELLED), or a client abort, or
    // Envoy's message timeout; which of the last two, the record asks the stream's EnvoyTimers.
    finish();
  }

  @Override
  public synchronized void onCompleted() {
    if (!replies.closed()) {
      out.onCompleted();
    }
    finish();
  }

  @Override
  public synchronized void resume(Runnable work) {
    try {
      work.run();
    } catch (RuntimeException e) {
      failOpen(e, null, null);
    }
  }

  @Override
  public boolean closed() {
    return replies.closed();
  }

  @Override
  public void sent(int bytes) {
    record.sent(bytes);
  }

  @Override
  public void gone() {
    finish();
  }

  // ---------------------------------------------------------------------------------------------
  // Response

  /** Chooses the response's leg: the phase, and whether the body can be read at all. */
  private void onResponseHeaders(HttpHeaders headers, ReplyQueue.Slot slot) {
    ResponseHead response = ResponseHead.of(headers);
    RequestSide.Classified request = requestSide.onResponseHeaders(response);
    boolean requestStillStreaming = requestSide.stillStreaming();
    Phase phase = request.classification().phase();
    if (phase == Phase.NONE || !response.readable()) {
      record.report(phase, Outcome.NOT_DISAGGREGATED);
      replies.complete(slot, EnvoyMessages.skipResponseBody(requestStillStreaming, null));
      return;
    }
    boolean removesInjectedUsage = requestSide.removesInjectedUsage();
    ResponseProcessors processors = requestSide.processors();
    Leg.Tools tools = new Leg.Tools(services, replies, record, this);
    if (phase == Phase.CONTEXT) {
      leg =
          new ContextLeg(
              tools,
              processors.context(response.eventStream()),
              new ContextStoreKeys(request.classification().keys(), services.config().limits().maxKeyBytes()),
              request.fingerprint());
      replies.complete(
          slot,
          EnvoyMessages.responseHeaders(null, EnvoyMessages.mode(requestStillStreaming, true, true), null));
      return;
    }
    GenerationLeg generation =
        new GenerationLeg(
            tools,
            new GenerationLeg.Start(
                request.classification(),
                request.fingerprint(),
                request.shape(),
                response.eventStream(),
                processors,
                removesInjectedUsage,
                requestStillStreaming,
                response.announcedLength()));
    leg = generation;
    generation.begin(slot);
  }

  private void onResponseBody(HttpBody chunk, ReplyQueue.Slot slot) {
    responseEnded = chunk.getEndOfStream();
    record.received(chunk.getBody().size());
    leg.onBody(chunk, slot);
  }

  // ---------------------------------------------------------------------------------------------
  // Failure, end

  /**
   * Lets the exchange through unmodified: every held byte goes out with the reply owed for the
   * current (or held) body message, every other reply owed passes things through as they are.
   *
   * @param request the message being handled, or null (a store or timer result)
   * @param current its slot, or null
   */
  private void failOpen(RuntimeException e, ProcessingRequest request, ReplyQueue.Slot current) {
    // The class and the failing frame only: an exception message could quote body bytes.
    services.warnings().internalError(e);
    // Counted first: the summary's bytes_out is then what went out before the failure.
    Phase phase = requestSide.phase();
    record.report(phase == null ? Phase.NONE : phase, Outcome.ERROR);
    requestSide.abandon();
    byte[] held = leg.abandon();
    leg = new PassThroughLeg(replies, record);
    replies.failOpen(held, request, current);
  }

  private void finish() {
    if (!replies.close()) {
      return;
    }
    leg.streamEnded(record.reported() ? null : requestSide.phase());
    services.metrics().streamClosed();
  }
}
