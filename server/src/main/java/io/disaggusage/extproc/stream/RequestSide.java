package io.disaggusage.extproc.stream;

import io.disaggusage.extproc.classify.Classification;
import io.disaggusage.extproc.classify.PromptFingerprint;
import io.disaggusage.extproc.classify.RequestBodyReader;
import io.disaggusage.extproc.classify.RequestFacts;
import io.disaggusage.extproc.classify.RequestHead;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.rewrite.ResponseProcessors;
import io.disaggusage.extproc.usage.ApiShape;
import io.disaggusage.extproc.usage.ApiShapes;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;

/**
 * The request side of one exchange, as the {@link Leg}s are its response side: answers the request's
 * messages and decides, once, what the request is. The request headers choose whether the body is
 * read (because the classifier needs it, or for the {@link UsageInjection}) and what their reply
 * removes; body chunks feed the body reader and go through the injection; what was read is classified
 * when the body ends, or when the response headers come first. The result, {@link Classified}, is
 * what the stream hands to the response's leg.
 *
 * <p>The request's head and body reader are kept only until the request is classified: the header map
 * and the parser are the largest things a stream would otherwise keep to its end. Every message is
 * answered at once; nothing here waits. Guarded by the owning stream's monitor.
 */
final class RequestSide {

  /**
   * What the request decided for its response.
   *
   * @param fingerprint what this leg shares with the other leg of its flow; the store binds the
   *     context usage to it. Null when the body was not read whole (with {@code
   *     classification.trust_id_header}, explicit {@code x-disagg-*} headers settled phase and key) or
   *     holds no prompt: such a leg matches only another unbound leg.
   * @param shape the API the request's path names; null for a request the service does not handle
   */
  record Classified(Classification classification, PromptFingerprint fingerprint, ApiShape shape) {
    /** A request the service does not handle, or one that never came whole enough to tell. */
    static final Classified NONE = new Classified(Classification.NONE, null, null);
  }

  /** A handled request until it is classified; {@code scanner} is null when its body does not decide. */
  private record Unclassified(RequestHead head, ApiShape shape, RequestBodyReader scanner) {}

  private final ExchangeServices services;
  private final ReplyQueue replies;
  private final ExchangeRecord record;
  private Unclassified unclassified;
  /** Null until the request is classified. */
  private Classified classified;
  /** streaming.inject_include_usage for this exchange, or null. */
  private UsageInjection injection;
  /** The request body streams through the service (to be read, or rewritten). */
  private boolean readingBody;
  private boolean ended;
  /** The exchange is let through unmodified: a rewrite under way stops at the next chunk. */
  private boolean abandoned;

  RequestSide(ExchangeServices services, ReplyQueue replies, ExchangeRecord record) {
    this.services = services;
    this.replies = replies;
    this.record = record;
  }

  void onHeaders(ProcessingRequest request, ReplyQueue.Slot slot) {
    HttpHeaders headers = request.getRequestHeaders();
    RequestHead head = EnvoyMessages.requestHead(request);
    if (!services.classifier().handles(head)) {
      classified = Classified.NONE;
      record.report(Phase.NONE, Outcome.NOT_DISAGGREGATED);
      replies.complete(slot, EnvoyMessages.requestHeaders(null, EnvoyMessages.allOff()));
      return;
    }
    boolean stripAcceptEncoding = services.config().classification().stripAcceptEncoding();
    ApiShape shape = ApiShapes.forPath(head.path());
    injection = UsageInjection.begin(services, head, shape, headers.getEndOfStream(), this::classificationSoFar);
    HeaderMutation mutation =
        injection != null
            ? UsageInjection.headerMutation(stripAcceptEncoding)
            : stripAcceptEncoding ? EnvoyMessages.removeHeaders("accept-encoding") : null;
    boolean scanBody = !headers.getEndOfStream() && services.classifier().needsBody(head);
    readingBody = scanBody || injection != null;
    unclassified =
        new Unclassified(
            head,
            shape,
            scanBody
                ? RequestBodyReader.forRequest(head, services.json(), services.config().limits().maxUsageBytes())
                : null);
    if (!scanBody) {
      ended = !readingBody;
      classify(RequestFacts.NONE);
    }
    replies.complete(slot, EnvoyMessages.requestHeaders(mutation, EnvoyMessages.mode(readingBody, true, false)));
  }

  void onBody(HttpBody chunk, ReplyQueue.Slot slot) {
    RequestBodyReader scanner = scanner();
    if (scanner != null) {
      scanner.feed(chunk.getBody().asReadOnlyByteBuffer());
    }
    // Answered first: a failure in what follows must not take rewritten request bytes with it.
    replies.complete(
        slot, EnvoyMessages.body(true, injection == null ? null : injection.onRequestBody(chunk, abandoned), null));
    if (chunk.getEndOfStream()) {
      ended = true;
      endScan();
    }
  }

  /**
   * The response headers arrived: a request not classified yet is classified on what has been read
   * (the upstream answered before the request body ended), and the usage injection learns what the
   * response is.
   */
  Classified onResponseHeaders(ResponseHead response) {
    if (classified == null) {
      endScan();
      if (classified == null) {
        classified = Classified.NONE;
      }
    }
    if (injection != null) {
      injection.onResponseHeaders(
          response.success() && !response.endOfStream(), response.identity(), response.eventStream());
    }
    return classified;
  }

  /** Whether the request body is still streaming through: the response's replies keep its mode. */
  boolean stillStreaming() {
    return readingBody && !ended;
  }

  /** Whether the request body has ended (or is not read): later body messages are not answered. */
  boolean ended() {
    return ended;
  }

  /** Whether the response is read to take out the usage event the injection caused. */
  boolean removesInjectedUsage() {
    return injection != null && injection.removesUsage();
  }

  /** The response body processors: those that take out an injected usage event, or the usual ones. */
  ResponseProcessors processors() {
    return removesInjectedUsage() ? injection.processors() : services.processors();
  }

  /** The phase the request was classified with, or null before it is classified. */
  Phase phase() {
    return classified == null ? null : classified.classification().phase();
  }

  /** The exchange is let through unmodified from now on (internal error). */
  void abandon() {
    abandoned = true;
  }

  private RequestBodyReader scanner() {
    return unclassified == null ? null : unclassified.scanner();
  }

  /**
   * The request's classification: the one decided, or, while the body is still being read, that of
   * what has been read so far (the usage injection asks once the request object is complete).
   */
  private Classification classificationSoFar() {
    if (classified != null) {
      return classified.classification();
    }
    return services.classifier().classify(unclassified.head(), scanner());
  }

  /** The request body has been read as far as it will be: what was read decides. */
  private void endScan() {
    RequestBodyReader scanner = scanner();
    if (scanner != null) {
      scanner.end();
      classify(scanner.facts());
    }
  }

  private void classify(RequestFacts facts) {
    Classification classification = services.classifier().classify(unclassified.head(), scanner());
    classified = new Classified(classification, facts.fingerprint(), unclassified.shape());
    unclassified = null; // its header map and body parser would otherwise live as long as the response
    record.classified(
        facts.model(),
        classification.keys().isEmpty() ? null : classification.keys().get(0),
        classification.refused(),
        classification.phase());
    if (!classification.refused().isEmpty()) {
      services.warnings().refused(record.refused(), classification.phase());
    }
  }
}
