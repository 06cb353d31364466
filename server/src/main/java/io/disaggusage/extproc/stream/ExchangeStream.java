package io.disaggusage.extproc.stream;

import com.google.protobuf.ByteString;
import com.google.protobuf.Struct;
import io.disaggusage.extproc.classify.Classification;
import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.classify.Ordering;
import io.disaggusage.extproc.classify.PromptFingerprint;
import io.disaggusage.extproc.classify.RequestBodyReader;
import io.disaggusage.extproc.classify.RequestFacts;
import io.disaggusage.extproc.classify.RequestHead;
import io.disaggusage.extproc.rewrite.Bytes;
import io.disaggusage.extproc.rewrite.ContextObservation;
import io.disaggusage.extproc.rewrite.ContextObserver;
import io.disaggusage.extproc.rewrite.ExchangeReport;
import io.disaggusage.extproc.rewrite.Outcome;
import io.disaggusage.extproc.rewrite.Phase;
import io.disaggusage.extproc.rewrite.ResponseBodyProcessor;
import io.disaggusage.extproc.rewrite.ResponseProcessors;
import io.disaggusage.extproc.logging.LogText;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.store.ContextLookup;
import io.disaggusage.extproc.usage.ApiShape;
import io.disaggusage.extproc.usage.ApiShapes;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.UsageFigures;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.stub.StreamObserver;
import java.math.BigInteger;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The state machine of one ext_proc stream, i.e. one HTTP exchange through Envoy. It translates
 * Envoy's messages into calls on the pure core (classifier, body processors, store) and their
 * results back into replies, one per message, in the order the messages came (a reply that waits for
 * the store holds back the ones behind it). Nothing here blocks: store and timer results arrive as
 * callbacks. All state is guarded by this object's monitor.
 *
 * <p>On any internal error the exchange is let through unmodified (behaviour.md §6): bytes held back
 * are given back in the next reply and Envoy is left to continue without the service.
 *
 * <p>When the outcome is reported, the logger {@value #SUMMARY_LOGGER} writes one DEBUG line for the
 * exchange: phase, outcome, the correlation key and model bounded by {@link LogText}, the token counts,
 * response body bytes in and out so far, and the time since the stream opened. Never body bytes.
 */
final class ExchangeStream implements StreamObserver<ProcessingRequest> {
  /** The logger of the per-exchange summary lines (DEBUG). */
  static final String SUMMARY_LOGGER = "io.disaggusage.extproc.exchanges";

  private static final Logger summary = LoggerFactory.getLogger(SUMMARY_LOGGER);
  private static final long TIMER_MARGIN_MILLIS = 200;
  private static final byte[] EMPTY = new byte[0];

  /** One reply owed to Envoy; filled in now or later, sent in order. */
  private static final class Slot {
    ProcessingResponse reply;
  }

  private final ExchangeServices services;
  private final StreamObserver<ProcessingResponse> out;
  private final ArrayDeque<Slot> slots = new ArrayDeque<>();

  private boolean closed;
  private boolean abandoned;

  private RequestHead head;
  private RequestBodyReader scanner;
  private boolean readingRequestBody;
  private boolean requestEnded;
  private Classification classification;
  private String model;
  /**
   * What this leg shares with the other leg of its flow; the store binds the context usage to it. Null
   * when the body was not read whole (with {@code classification.trust_id_header}, explicit {@code
   * x-disagg-*} headers settled phase and key) or holds no prompt: such a leg matches only another
   * unbound leg.
   */
  private PromptFingerprint fingerprint;
  /** streaming.inject_include_usage for this exchange, or null. */
  private UsageInjection injection;

  private ResponseBodyProcessor body;
  private List<CorrelationKey> contextKeys = List.of();
  private boolean responseEnded;
  private Slot deferredEnd;
  private byte[] deferredEndPrefix = EMPTY;
  private byte[] giveBack = EMPTY;
  /** Bytes taken from the body processor for the reply being built; given back if that fails. */
  private byte[] inFlight = EMPTY;
  /** The context usage went to the store (or was found unusable): later chunks are only forwarded. */
  private boolean contextStored;
  private CompletableFuture<ContextLookup> contextWait;
  private long contextWaitStart;
  private boolean reported;
  /** {@link ResponseBodyProcessor#usageReleased} when metadata last went out with a reply. */
  private int usagePublished;
  /** Response body bytes received so far (also for the summary line). */
  private long bytesIn;
  /** The response's content-length as the upstream announced it, or -1. */
  private long announcedLength = -1;

  // For the summary line only.
  private final long openedNanos = System.nanoTime();
  private long bytesOut;
  private CorrelationKey logKey;
  private ExchangeReport generationReport;
  private ContextUsage storedUsage;

  ExchangeStream(ExchangeServices services, StreamObserver<ProcessingResponse> out) {
    this.services = services;
    this.out = out;
    services.metrics().streamOpened();
  }

  @Override
  public synchronized void onNext(ProcessingRequest request) {
    if (closed) {
      return;
    }
    long started = System.nanoTime();
    Slot slot = null;
    try {
      switch (request.getRequestCase()) {
        case REQUEST_HEADERS -> onRequestHeaders(request, slot = open());
        case REQUEST_BODY -> {
          if (!requestEnded) {
            onRequestBody(request.getRequestBody(), slot = open());
          }
        }
        case REQUEST_TRAILERS -> complete(slot = open(), EnvoyMessages.trailers(true));
        case RESPONSE_HEADERS -> onResponseHeaders(request.getResponseHeaders(), slot = open());
        case RESPONSE_BODY -> {
          if (!responseEnded) {
            onResponseBody(request.getResponseBody(), slot = open());
          }
        }
        case RESPONSE_TRAILERS -> complete(slot = open(), EnvoyMessages.trailers(false));
        default -> {} // nothing Envoy expects an answer to
      }
      inFlight = EMPTY;
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
    // Envoy reset the stream: normal at the end of every exchange (CANCELLED), or a client abort.
    finish();
  }

  @Override
  public synchronized void onCompleted() {
    if (!closed) {
      out.onCompleted();
    }
    finish();
  }

  // ---------------------------------------------------------------------------------------------
  // Request

  private void onRequestHeaders(ProcessingRequest request, Slot slot) {
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
      report(Phase.NONE, Outcome.NOT_DISAGGREGATED);
      complete(slot, EnvoyMessages.requestHeaders(null, EnvoyMessages.allOff()));
      return;
    }
    boolean stripAcceptEncoding = services.config().classification().stripAcceptEncoding();
    injection = UsageInjection.begin(services, head, headers.getEndOfStream(), this::requestFacts);
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
    complete(
        slot, EnvoyMessages.requestHeaders(mutation, EnvoyMessages.mode(readingRequestBody, true, false)));
  }

  private void onRequestBody(HttpBody chunk, Slot slot) {
    if (scanner != null) {
      scanner.feed(chunk.getBody().asReadOnlyByteBuffer());
    }
    // Answered first: a failure in what follows must not take rewritten request bytes with it.
    ByteString replacement = injection == null ? null : injection.onRequestBody(chunk, abandoned);
    complete(slot, EnvoyMessages.body(true, replacement, null));
    if (chunk.getEndOfStream()) {
      requestEnded = true;
      if (scanner != null) {
        scanner.end();
        classify(scanner.facts());
        scanner = null; // its parser and buffers would otherwise live as long as the response streams
      }
    }
  }

  /** What the request body scanner has found so far (nothing when the body is not scanned). */
  private RequestFacts requestFacts() {
    return scanner != null ? scanner.facts() : RequestFacts.NONE;
  }

  private void classify(RequestFacts facts) {
    classification = services.classifier().classify(head, facts);
    model = facts.model();
    fingerprint = facts.fingerprint();
    if (!classification.keys().isEmpty()) {
      logKey = classification.keys().get(0);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Response headers: decide what to read

  private void onResponseHeaders(HttpHeaders headers, Slot slot) {
    if (classification == null) {
      // The upstream answered before the request body ended; decide on what has been read.
      if (scanner != null) {
        scanner.end();
        classify(scanner.facts());
        scanner = null;
      } else {
        classification = Classification.NONE;
      }
    }
    boolean requestStillStreaming = readingRequestBody && !requestEnded;
    Map<String, String> map = EnvoyMessages.headers(headers.getHeaders());
    announcedLength = contentLength(map.get("content-length"));
    if (injection != null) {
      injection.onResponseHeaders(
          is2xx(map.get(":status")) && !headers.getEndOfStream(),
          identity(map.get("content-encoding")),
          isEventStream(map.get("content-type")));
    }
    Phase phase = classification.phase();
    if (phase == Phase.NONE) {
      report(Phase.NONE, Outcome.NOT_DISAGGREGATED);
      complete(slot, noResponseBody(requestStillStreaming, null));
      return;
    }
    if (!is2xx(map.get(":status")) || !identity(map.get("content-encoding")) || headers.getEndOfStream()) {
      report(phase, Outcome.NOT_DISAGGREGATED);
      complete(slot, noResponseBody(requestStillStreaming, null));
      return;
    }
    boolean eventStream = isEventStream(map.get("content-type"));
    if (phase == Phase.CONTEXT) {
      body = processors().context(eventStream);
      contextKeys = classification.keys();
      complete(
          slot,
          EnvoyMessages.responseHeaders(
              null, EnvoyMessages.mode(requestStillStreaming, true, true), null));
      return;
    }
    ApiShape shape = ApiShapes.forPath(head.path());
    if (classification.carriedContext() != null) {
      startGeneration(slot, eventStream, shape, requestStillStreaming, classification.carriedContext());
      return;
    }
    if (classification.keys().isEmpty()) {
      if (removesInjectedUsage()) {
        startWithoutContext(slot, eventStream, shape, requestStillStreaming, Outcome.PASSTHROUGH_NO_CONTEXT);
        return;
      }
      report(Phase.GENERATION, Outcome.PASSTHROUGH_NO_CONTEXT);
      complete(slot, noResponseBody(requestStillStreaming, Outcome.PASSTHROUGH_NO_CONTEXT));
      return;
    }
    boolean concurrent = classification.ordering() == Ordering.CONCURRENT;
    services
        .store()
        .take(classification.keys(), fingerprint)
        .whenComplete(
            (found, error) ->
                onLookup(slot, eventStream, shape, requestStillStreaming, concurrent, found, error));
  }

  private synchronized void onLookup(
      Slot slot,
      boolean eventStream,
      ApiShape shape,
      boolean requestStillStreaming,
      boolean concurrent,
      ContextLookup found,
      Throwable error) {
    if (closed) {
      return;
    }
    try {
      if (error != null) {
        services.metrics().storeError(Metrics.StoreOperation.TAKE);
        services.warnings().storeReadFailed(error);
      }
      ContextUsage context = error == null ? found.usage().orElse(null) : null;
      if (context == null && !concurrent) {
        // Context-first: the context response would already have been stored. No context phase.
        Outcome outcome = error == null ? missOutcome(found, Outcome.PASSTHROUGH_NO_CONTEXT) : Outcome.ERROR;
        if (removesInjectedUsage()) {
          startWithoutContext(slot, eventStream, shape, requestStillStreaming, outcome);
          return;
        }
        report(Phase.GENERATION, outcome);
        complete(slot, noResponseBody(requestStillStreaming, outcome));
        return;
      }
      startGeneration(slot, eventStream, shape, requestStillStreaming, context);
    } catch (RuntimeException e) {
      failOpen(e, null, slot);
    }
  }

  private void startGeneration(
      Slot slot, boolean eventStream, ApiShape shape, boolean requestStillStreaming, ContextUsage context) {
    body = processors().generation(eventStream, shape);
    if (context != null) {
      body.resolveContext(context, null);
    }
    // The body may change length: the content-length Envoy saw must not reach the client.
    complete(
        slot,
        EnvoyMessages.responseHeaders(
            EnvoyMessages.removeHeaders("content-length"),
            EnvoyMessages.mode(requestStillStreaming, true, true),
            null));
  }

  /**
   * A generation response with no context usage that is read all the same, for the usage event the
   * service itself asked for: it passes as the worker sent it, less that event.
   */
  private void startWithoutContext(
      Slot slot, boolean eventStream, ApiShape shape, boolean requestStillStreaming, Outcome outcome) {
    startGeneration(slot, eventStream, shape, requestStillStreaming, null);
    body.resolveContext(null, outcome);
  }

  /** The response body processors: the usual ones, or ones that take out an injected usage event. */
  private ResponseProcessors processors() {
    return removesInjectedUsage() ? injection.processors() : services.processors();
  }

  private boolean removesInjectedUsage() {
    return injection != null && injection.removesUsage();
  }

  private ProcessingResponse noResponseBody(boolean requestStillStreaming, Outcome metadataOutcome) {
    Struct metadata =
        metadataOutcome == null
            ? null
            : UsageMetadata.outcomeOnly(services.config().metadata().namespace(), metadataOutcome, model);
    return EnvoyMessages.responseHeaders(
        null, EnvoyMessages.mode(requestStillStreaming, false, false), metadata);
  }

  // ---------------------------------------------------------------------------------------------
  // Response body

  private void onResponseBody(HttpBody chunk, Slot slot) {
    boolean end = chunk.getEndOfStream();
    if (end) {
      responseEnded = true;
    }
    bytesIn += chunk.getBody().size();
    if (body == null || abandoned) {
      if (giveBack.length > 0) {
        byte[] owed = Bytes.concat(giveBack, BodyBytes.of(chunk.getBody()));
        giveBack = EMPTY;
        bytesOut += owed.length;
        complete(slot, EnvoyMessages.body(false, ByteString.copyFrom(owed), null));
      } else {
        bytesOut += chunk.getBody().size();
        complete(slot, EnvoyMessages.body(false, null, null));
      }
      return;
    }
    byte[] bytes = BodyBytes.of(chunk.getBody());
    body.accept(bytes);
    if (end) {
      body.finish();
    }
    if (body.wantsContext() && contextWait == null) {
      awaitContext();
    } else if (contextWait != null && !contextWait.isDone() && !body.waiting() && !body.wantsContext()) {
      // The processor gave up waiting by itself (held bytes above their cap): withdraw the waiter, so
      // it holds no permit and consumes no context usage that arrives later.
      contextWait.cancel(false);
    }
    byte[] ready = body.takeReady();
    inFlight = ready;
    if (body instanceof ContextObserver observer) {
      onContextChunk(observer, slot, bytes, ready, end);
      return;
    }
    if (!end) {
      complete(slot, bodyReply(bytes, ready, releasedUsageMetadata()));
      return;
    }
    if (body.waiting()) {
      // Hold the last reply until the context usage lands or the deadline passes.
      deferredEnd = slot;
      deferredEndPrefix = ready;
      inFlight = EMPTY;
      if (!endCameWithTheLastBytes(bytes)) {
        long remaining =
            services.config().ordering().contextWait().toMillis()
                - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - contextWaitStart);
        send(EnvoyMessages.extendTimer(Math.max(1, remaining) + TIMER_MARGIN_MILLIS));
      }
      return;
    }
    completeGeneration(slot, bytes, ready);
  }

  /**
   * Whether this last message is an empty end that Envoy sent together with the message before it,
   * so that Envoy runs no message timer for it and would ignore an {@code override_message_timeout}.
   * Envoy's timer belongs to the latest message it sent and stops at any reply, also at the reply to an
   * earlier message. Envoy's HTTP/1 codec reports the end of a body with a content-length in the same
   * event as its last bytes, so when every announced byte came before this empty message, Envoy sent
   * the two back to back, and our reply to the first stopped the timer before this one could need
   * extending. Any other end (one carrying data, the end of a chunked stream, which may come in a
   * read of its own) gets the override.
   */
  private boolean endCameWithTheLastBytes(byte[] lastBytes) {
    return lastBytes.length == 0 && announcedLength >= 0 && bytesIn == announcedLength;
  }

  private void completeGeneration(Slot slot, byte[] original, byte[] ready) {
    ExchangeReport report = body.report();
    Struct metadata = UsageMetadata.of(services.config().metadata().namespace(), report, model);
    ProcessingResponse reply = bodyReply(original, ready, metadata);
    countGeneration(report); // after the reply is built: the summary line's bytes_out includes it
    complete(slot, reply);
  }

  /** Counts the generation exchange's final report (tokens and outcome), once. */
  private void countGeneration(ExchangeReport report) {
    if (!reported) {
      generationReport = report;
      services.metrics().tokens(report.model() != null ? report.model() : model, report.figures());
      report(Phase.GENERATION, report.outcome());
    }
  }

  /**
   * The metadata for a reply that hands out a usage-bearing event for the first time since the last
   * such reply, or null. A client may read that event (and {@code [DONE]}) and hang up before the
   * body's end reaches us: sglang-router does, and Envoy then resets the stream before our last
   * reply, so the metadata goes out with the usage itself, where access logs and rate limits see it
   * whatever happens next. The last reply publishes the final figures again.
   */
  private Struct releasedUsageMetadata() {
    int released = body.usageReleased();
    if (released == usagePublished) {
      return null;
    }
    usagePublished = released;
    return UsageMetadata.of(services.config().metadata().namespace(), body.report(), model);
  }

  /**
   * The stream ended without the exchange having been counted: a reset, most often a client that
   * hung up. After a usage-bearing event went out the exchange counts as that event's outcome (the
   * client has its usage); before, as {@link Outcome#RESET}.
   */
  private void countUnfinished() {
    if (reported || classification == null || contextStored) {
      return; // a store write under way counts itself when it lands (onStored)
    }
    if (body != null && !(body instanceof ContextObserver) && !abandoned && body.usageReleased() > 0) {
      countGeneration(body.report());
      return;
    }
    report(classification.phase(), Outcome.RESET);
  }

  private void awaitContext() {
    contextWaitStart = System.nanoTime();
    if (!services.waits().tryAcquire()) {
      // limits.max_waiters: too many exchanges wait already. This one does not: its usage goes out
      // as the worker wrote it, like a deadline that has passed, and the refusal is counted.
      services.metrics().waitRefused();
      contextWait = CompletableFuture.completedFuture(ContextLookup.MISS);
      body.resolveContext(null, Outcome.CONTEXT_TIMEOUT);
      return;
    }
    contextWait =
        services
            .store()
            .await(classification.keys(), fingerprint, services.config().ordering().contextWait());
    contextWait.whenComplete((found, error) -> services.waits().release());
    contextWait.whenComplete(this::onContext);
  }

  private synchronized void onContext(ContextLookup found, Throwable error) {
    if (closed || abandoned || body == null || error instanceof CancellationException) {
      return;
    }
    Slot slot = null;
    try {
      services.metrics().contextWaited(System.nanoTime() - contextWaitStart);
      if (error != null) {
        services.metrics().storeError(Metrics.StoreOperation.AWAIT);
        services.warnings().storeReadFailed(error);
      }
      ContextUsage context = error == null ? found.usage().orElse(null) : null;
      body.resolveContext(
          context, error == null ? missOutcome(found, Outcome.CONTEXT_TIMEOUT) : Outcome.ERROR);
      if (deferredEnd != null) {
        slot = deferredEnd;
        deferredEnd = null;
        byte[] ready = Bytes.concat(deferredEndPrefix, body.takeReady());
        deferredEndPrefix = EMPTY;
        inFlight = ready;
        completeGeneration(slot, null, ready);
        inFlight = EMPTY;
      }
    } catch (RuntimeException e) {
      if (slot != null && slot.reply == null) {
        deferredEnd = slot; // the deferred last reply still owes the bytes taken for it
      }
      failOpen(e, null, deferredEnd);
    }
  }

  /**
   * The outcome of a lookup that found no usage of this flow: {@code fingerprint_mismatch} when the keys
   * held other flows' usage (a shared or forged key, warned about by its source), else {@code otherwise}.
   */
  private Outcome missOutcome(ContextLookup lookup, Outcome otherwise) {
    if (!lookup.isMismatch()) {
      return otherwise;
    }
    services.warnings().fingerprintMismatch(classification.keys().get(0).source());
    return Outcome.FINGERPRINT_MISMATCH;
  }

  /**
   * A context response chunk. The reply to the chunk in which the usage settles waits for the store
   * write: a client that knows the body's length (a JSON response with content-length) has its whole
   * response as soon as Envoy forwards that chunk, without waiting for the end-of-stream message
   * Envoy often sends on its own, and the orchestrator's generation call may follow at once.
   */
  private void onContextChunk(ContextObserver observer, Slot slot, byte[] original, byte[] ready, boolean end) {
    if (!contextStored && (end || observer.contentEnded())) {
      contextStored = true;
      storeContext(observer.observation(), slot, original, ready);
      return;
    }
    complete(slot, bodyReply(original, ready, null));
  }

  private void storeContext(ContextObservation observation, Slot slot, byte[] original, byte[] ready) {
    if (observation.usage() == null) {
      answerContext(slot, original, ready, observation.outcome());
      return;
    }
    storedUsage = observation.usage();
    List<CorrelationKey> keys = new ArrayList<>(contextKeys);
    boolean trtOrNone =
        keys.isEmpty() || keys.get(0).source() == CorrelationKey.Source.TRTLLM;
    if (trtOrNone) {
      for (String id : observation.contextIds()) {
        CorrelationKey key = new CorrelationKey(CorrelationKey.Source.TRTLLM, id);
        if (!keys.contains(key) && id.length() <= services.config().limits().maxKeyBytes()) {
          keys.add(key);
        }
      }
    }
    if (keys.isEmpty()) {
      answerContext(slot, original, ready, Outcome.PASSTHROUGH_NO_CONTEXT);
      return;
    }
    if (logKey == null) {
      logKey = keys.get(0);
    }
    // This reply waits for the write, and the replies behind it with it: the client cannot have the
    // whole response before the usage is in the store, so a context-first lookup finds it (§4).
    services
        .store()
        .put(keys, fingerprint, observation.usage())
        .whenComplete((ok, error) -> onStored(slot, original, ready, error));
  }

  /** A context chunk's reply with nothing to store: the exchange's outcome is known now. */
  private void answerContext(Slot slot, byte[] original, byte[] ready, Outcome outcome) {
    ProcessingResponse reply = bodyReply(original, ready, null);
    report(Phase.CONTEXT, outcome);
    complete(slot, reply);
  }

  private synchronized void onStored(Slot slot, byte[] original, byte[] ready, Throwable error) {
    if (error != null) {
      services.metrics().storeError(Metrics.StoreOperation.PUT);
      services.warnings().storeWriteFailed(error);
    }
    Outcome outcome = error == null ? Outcome.STORED : Outcome.ERROR;
    if (closed || abandoned) {
      // Nothing to answer any more, or the reply already went out unmodified. Counted all the same:
      // the write landed (or failed) although the client went away meanwhile.
      report(Phase.CONTEXT, outcome);
      return;
    }
    try {
      ProcessingResponse reply = bodyReply(original, ready, null);
      report(Phase.CONTEXT, outcome);
      complete(slot, reply);
    } catch (RuntimeException e) {
      if (slot.reply == null) {
        deferredEnd = slot; // this reply owes the bytes taken for it
        inFlight = ready;
      }
      failOpen(e, null, slot);
    }
  }

  /** A body reply that forwards the chunk untouched when the output is exactly the input. */
  private ProcessingResponse bodyReply(byte[] original, byte[] ready, Struct metadata) {
    bytesOut += ready.length;
    if (original != null && Arrays.equals(original, ready)) {
      return EnvoyMessages.body(false, null, metadata);
    }
    return EnvoyMessages.body(false, ByteString.copyFrom(ready), metadata);
  }

  // ---------------------------------------------------------------------------------------------
  // Failure, replies, end

  /**
   * Lets the exchange through unmodified: every held byte goes out with the reply owed for the
   * current (or deferred) body message, every other reply owed passes things through as they are.
   */
  private void failOpen(RuntimeException e, ProcessingRequest request, Slot current) {
    // The class and the failing frame only: an exception message could quote body bytes.
    services.warnings().internalError(e);
    // Counted first: the summary's bytes_out is then what went out before the failure.
    report(classification == null ? Phase.NONE : classification.phase(), Outcome.ERROR);
    abandoned = true;
    if (contextWait != null) {
      contextWait.cancel(false);
    }
    byte[] held = body == null ? EMPTY : body.abandon();
    body = null;
    Slot bodySlot = deferredEnd;
    deferredEnd = null;
    if (bodySlot == null
        && current != null
        && current.reply == null
        && request != null
        && request.hasResponseBody()) {
      bodySlot = current;
    }
    // Bytes already taken for the current reply come before those the processor still holds.
    byte[] owed = Bytes.concat(Bytes.concat(deferredEndPrefix, inFlight), held);
    deferredEndPrefix = EMPTY;
    inFlight = EMPTY;
    if (bodySlot != null) {
      bytesOut += owed.length;
      bodySlot.reply = EnvoyMessages.body(false, ByteString.copyFrom(owed), null);
    } else {
      giveBack = owed; // goes out with the next response body message
    }
    for (Slot slot : slots) {
      if (slot.reply == null) {
        slot.reply = passThroughReply(slot == current ? request : null);
      }
    }
    flush();
  }

  /** The neutral reply for a message after a failure. */
  private static ProcessingResponse passThroughReply(ProcessingRequest request) {
    if (request == null) {
      return EnvoyMessages.body(false, null, null);
    }
    return switch (request.getRequestCase()) {
      case REQUEST_HEADERS -> EnvoyMessages.requestHeaders(null, null);
      case RESPONSE_HEADERS -> EnvoyMessages.responseHeaders(null, null, null);
      case REQUEST_BODY -> EnvoyMessages.body(true, null, null);
      case REQUEST_TRAILERS -> EnvoyMessages.trailers(true);
      case RESPONSE_TRAILERS -> EnvoyMessages.trailers(false);
      default -> EnvoyMessages.body(false, null, null);
    };
  }

  private Slot open() {
    Slot slot = new Slot();
    slots.add(slot);
    return slot;
  }

  private void complete(Slot slot, ProcessingResponse reply) {
    slot.reply = reply;
    flush();
  }

  private void flush() {
    while (!slots.isEmpty() && slots.peek().reply != null) {
      send(slots.poll().reply);
    }
  }

  private void send(ProcessingResponse reply) {
    if (closed) {
      return;
    }
    try {
      out.onNext(reply);
    } catch (io.grpc.StatusRuntimeException e) {
      // Envoy cancelled the stream (client gone) while a deferred reply was being produced: nothing
      // left to answer; the cancellation itself arrives through onError.
      finish();
    }
  }

  private void report(Phase phase, Outcome outcome) {
    if (!reported) {
      reported = true;
      services.metrics().exchange(phase, outcome);
      if (summary.isDebugEnabled()) {
        logSummary(phase, outcome);
      }
    }
  }

  /** The exchange's DEBUG line: numbers, sizes, a bounded key and model; never body bytes. */
  private void logSummary(Phase phase, Outcome outcome) {
    UsageFigures figures = generationReport == null ? null : generationReport.figures();
    BigInteger prompt = figures != null ? figures.prompt() : null;
    BigInteger cached = figures != null ? figures.cached() : null;
    if (figures == null && storedUsage != null) {
      prompt = storedUsage.promptTokens();
      cached = storedUsage.cachedTokens();
    }
    String reportModel = generationReport == null ? null : generationReport.model();
    summary.debug(
        "exchange phase={} outcome={} key={} model={} prompt={} cached={} reported_cached={}"
            + " completion={} total={} corrected={} bytes_in={} bytes_out={} duration_ms={}",
        phase.label(),
        outcome.label(),
        logKey == null ? "-" : logKey.source().prefix() + ":" + LogText.bounded(logKey.value()),
        LogText.bounded(reportModel != null ? reportModel : model),
        number(prompt),
        number(cached),
        number(figures == null ? null : figures.reportedCached()),
        number(figures == null ? null : figures.completion()),
        number(figures == null ? null : figures.total()),
        generationReport != null && generationReport.corrected(),
        bytesIn,
        bytesOut,
        TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - openedNanos));
  }

  private static Object number(BigInteger value) {
    return value == null ? "-" : value;
  }

  private void finish() {
    if (closed) {
      return;
    }
    closed = true;
    if (contextWait != null) {
      contextWait.cancel(false);
    }
    countUnfinished();
    services.metrics().streamClosed();
  }

  private static boolean is2xx(String status) {
    return status != null && status.length() == 3 && status.charAt(0) == '2';
  }

  /** A content-length header's value, or -1 when there is none or it is not a plain number. */
  private static long contentLength(String value) {
    if (value == null) {
      return -1;
    }
    try {
      return Long.parseLong(value.trim());
    } catch (NumberFormatException e) {
      return -1;
    }
  }

  private static boolean identity(String contentEncoding) {
    return contentEncoding == null
        || contentEncoding.isBlank()
        || contentEncoding.trim().equalsIgnoreCase("identity");
  }

  private static boolean isEventStream(String contentType) {
    return contentType != null
        && contentType.toLowerCase(Locale.ROOT).startsWith("text/event-stream");
  }
}
