package io.disaggusage.extproc.stream;

import io.disaggusage.extproc.classify.Classification;
import io.disaggusage.extproc.classify.PromptFingerprint;
import io.disaggusage.extproc.classify.RequestBodyReader;
import io.disaggusage.extproc.classify.RequestFacts;
import io.disaggusage.extproc.classify.RequestHead;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.rewrite.ResponseProcessors;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.usage.ApiShape;
import io.disaggusage.extproc.usage.ApiShapes;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.stub.StreamObserver;
import java.util.Map;

/**
 * The state machine of one ext_proc stream, i.e. one HTTP exchange through Envoy: reads the request
 * and classifies it, then hands the response body to the {@link Leg} of its phase, decided at the
 * response headers. Replies go out through a {@link ReplyQueue}, one per message, in the order the
 * messages came. Nothing here blocks: store and timer results arrive as callbacks, which the legs run
 * through {@link #resume}. All state is guarded by this object's monitor.
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
  /** What is done with the response body: nothing until the response headers choose otherwise. */
  private Leg leg;
  private boolean abandoned;

  /** The request's headers, until the request is classified: a stream keeps only what its response needs. */
  private RequestHead head;
  /** The API the request's path names (set with the request headers of a handled request). */
  private ApiShape shape;
  private RequestBodyReader scanner;
  private boolean readingRequestBody;
  private boolean requestEnded;
  private boolean responseEnded;
  private Classification classification;
  /**
   * What this leg shares with the other leg of its flow; the store binds the context usage to it. Null
   * when the body was not read whole (with {@code classification.trust_id_header}, explicit {@code
   * x-disagg-*} headers settled phase and key) or holds no prompt: such a leg matches only another
   * unbound leg.
   */
  private PromptFingerprint fingerprint;
  /** streaming.inject_include_usage for this exchange, or null. */
  private UsageInjection injection;

  ExchangeStream(ExchangeServices services, StreamObserver<ProcessingResponse> out) {
    this.services = services;
    this.out = out;
    EnvoyTimers timers = new EnvoyTimers(services.config().grpc().envoyMessageTimeout());
    this.record = new ExchangeRecord(services.metrics(), timers);
    this.replies = new ReplyQueue(out, this, timers);
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
        case REQUEST_HEADERS -> onRequestHeaders(request, slot = replies.open(request));
        case REQUEST_BODY -> {
          if (!requestEnded) {
            onRequestBody(request.getRequestBody(), slot = replies.open(request));
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
  // Request

  private void onRequestHeaders(ProcessingRequest request, ReplyQueue.Slot slot) {
    HttpHeaders headers = request.getRequestHeaders();
    Map<String, String> map = EnvoyMessages.headers(headers.getHeaders());
    String path = map.getOrDefault(":path", "");
    int query = path.indexOf('?');
    head =
        new RequestHead(
            map.getOrDefault(":method", ""),
            query < 0 ? path : path.substring(0, query),
            map,
            EnvoyMessages.attribute(request, "xds.cluster_name"));
    if (!services.classifier().handles(head)) {
      classification = Classification.NONE;
      head = null;
      record.report(Phase.NONE, Outcome.NOT_DISAGGREGATED);
      replies.complete(slot, EnvoyMessages.requestHeaders(null, EnvoyMessages.allOff()));
      return;
    }
    boolean stripAcceptEncoding = services.config().classification().stripAcceptEncoding();
    shape = ApiShapes.forPath(head.path());
    injection = UsageInjection.begin(services, head, shape, headers.getEndOfStream(), this::classificationSoFar);
    HeaderMutation mutation =
        injection != null
            ? UsageInjection.headerMutation(stripAcceptEncoding)
            : stripAcceptEncoding ? EnvoyMessages.removeHeaders("accept-encoding") : null;
    boolean scanBody = !headers.getEndOfStream() && services.classifier().needsBody(head);
    readingRequestBody = scanBody || injection != null;
    if (scanBody) {
      scanner = RequestBodyReader.forRequest(head, services.json(), services.config().limits().maxUsageBytes());
    } else {
      requestEnded = !readingRequestBody;
      classify(RequestFacts.NONE);
    }
    replies.complete(
        slot, EnvoyMessages.requestHeaders(mutation, EnvoyMessages.mode(readingRequestBody, true, false)));
  }

  private void onRequestBody(HttpBody chunk, ReplyQueue.Slot slot) {
    if (scanner != null) {
      scanner.feed(chunk.getBody().asReadOnlyByteBuffer());
    }
    // Answered first: a failure in what follows must not take rewritten request bytes with it.
    replies.complete(
        slot, EnvoyMessages.body(true, injection == null ? null : injection.onRequestBody(chunk, abandoned), null));
    if (chunk.getEndOfStream()) {
      requestEnded = true;
      endScan();
    }
  }

  /**
   * The request's classification: the one decided, or, while the body is still being read, that of
   * what has been read so far (the usage injection asks once the request object is complete).
   */
  private Classification classificationSoFar() {
    if (classification != null) {
      return classification;
    }
    return services.classifier().classify(head, scanner != null ? scanner.facts() : RequestFacts.NONE);
  }

  /** The request body has been read as far as it will be: what was read decides. */
  private void endScan() {
    if (scanner != null) {
      scanner.end();
      classify(scanner.facts());
      scanner = null; // its parser and buffers would otherwise live as long as the response streams
    }
  }

  private void classify(RequestFacts facts) {
    classification = services.classifier().classify(head, facts);
    head = null; // its header map is the largest thing a stream would otherwise keep to the end
    fingerprint = facts.fingerprint();
    record.classified(facts.model(), classification.keys().isEmpty() ? null : classification.keys().get(0));
  }

  // ---------------------------------------------------------------------------------------------
  // Response

  /** Chooses the response's leg: the phase, and whether the body can be read at all. */
  private void onResponseHeaders(HttpHeaders headers, ReplyQueue.Slot slot) {
    if (classification == null) {
      // The upstream answered before the request body ended; decide on what has been read.
      endScan();
      if (classification == null) {
        classification = Classification.NONE;
      }
    }
    boolean requestStillStreaming = readingRequestBody && !requestEnded;
    ResponseHead response = ResponseHead.of(headers);
    if (injection != null) {
      injection.onResponseHeaders(
          response.success() && !response.endOfStream(), response.identity(), response.eventStream());
    }
    Phase phase = classification.phase();
    if (phase == Phase.NONE || !response.readable()) {
      record.report(phase, Outcome.NOT_DISAGGREGATED);
      replies.complete(slot, EnvoyMessages.skipResponseBody(requestStillStreaming, null));
      return;
    }
    boolean removesInjectedUsage = injection != null && injection.removesUsage();
    ResponseProcessors processors = removesInjectedUsage ? injection.processors() : services.processors();
    Leg.Tools tools = new Leg.Tools(services, replies, record, this);
    if (phase == Phase.CONTEXT) {
      leg =
          new ContextLeg(
              tools,
              processors.context(response.eventStream()),
              new ContextStoreKeys(classification.keys(), services.config().limits().maxKeyBytes()),
              fingerprint);
      replies.complete(
          slot,
          EnvoyMessages.responseHeaders(null, EnvoyMessages.mode(requestStillStreaming, true, true), null));
      return;
    }
    GenerationLeg generation =
        new GenerationLeg(
            tools,
            new GenerationLeg.Start(
                classification,
                fingerprint,
                shape,
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
    record.report(classification == null ? Phase.NONE : classification.phase(), Outcome.ERROR);
    abandoned = true;
    byte[] held = leg.abandon();
    leg = new PassThroughLeg(replies, record);
    replies.failOpen(held, request, current);
  }

  private void finish() {
    if (!replies.close()) {
      return;
    }
    leg.streamEnded(record.reported() || classification == null ? null : classification.phase());
    services.metrics().streamClosed();
  }
}
