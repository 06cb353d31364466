package io.disaggusage.extproc.stream;

import com.google.protobuf.Struct;
import io.disaggusage.extproc.classify.Classification;
import io.disaggusage.extproc.classify.Ordering;
import io.disaggusage.extproc.classify.PromptFingerprint;
import io.disaggusage.extproc.rewrite.Bytes;
import io.disaggusage.extproc.rewrite.ExchangeReport;
import io.disaggusage.extproc.rewrite.GenerationRewriter;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.rewrite.ResponseProcessors;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.store.ContextLookup;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.ApiShape;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * The generation leg: finds the context usage (carried in the request, in the store at once, or by
 * waiting for it when the rewriter needs it) and has the response's usage rewritten with it. The only
 * leg that waits: the last reply is held until the context usage lands or the deadline passes, with
 * Envoy's message timer extended meanwhile. Without context usage the response is read only for what
 * no context is needed for: clamping a count that cannot be true ({@code ordering.clamp_without_context})
 * and taking out a usage event the service's own request edit caused.
 */
final class GenerationLeg implements Leg {
  private static final long TIMER_MARGIN_MILLIS = 200;

  /**
   * What the response headers decided for the leg.
   *
   * @param processors the body processors: the usual ones or ones that take out an injected usage event
   * @param removesInjectedUsage the response is read for that event even without context usage
   * @param requestStillStreaming the request body is still being read (the reply's processing mode)
   * @param announcedLength the response's content-length as the upstream announced it, or -1
   */
  record Start(
      Classification classification,
      PromptFingerprint fingerprint,
      ApiShape shape,
      boolean eventStream,
      ResponseProcessors processors,
      boolean removesInjectedUsage,
      boolean requestStillStreaming,
      long announcedLength) {}

  private final ExchangeServices services;
  private final ReplyQueue replies;
  private final ExchangeRecord record;
  private final Host host;
  private final Start start;
  private GenerationRewriter rewriter;
  private CompletableFuture<ContextLookup> contextWait;
  private long contextWaitStart;
  /** The outcome of a response read although it has no context usage; null when it has some. */
  private Outcome missOutcomeRead;
  /** {@link GenerationRewriter#usageReleased} when metadata last went out with a reply. */
  private int usagePublished;
  private boolean abandoned;

  GenerationLeg(Tools tools, Start start) {
    this.services = tools.services();
    this.replies = tools.replies();
    this.record = tools.record();
    this.host = tools.host();
    this.start = start;
  }

  /** Answers the response headers: at once, or once the store has been asked for the context usage. */
  void begin(ReplyQueue.Slot slot) {
    Classification classification = start.classification();
    if (classification.carriedContext() != null) {
      rewrite(slot, classification.carriedContext());
    } else if (classification.keys().isEmpty()) {
      withoutContext(slot, Outcome.PASSTHROUGH_NO_CONTEXT);
    } else {
      boolean concurrent = classification.ordering() == Ordering.CONCURRENT;
      services
          .store()
          .take(classification.keys(), start.fingerprint())
          .whenComplete((found, error) -> host.resume(() -> onLookup(slot, concurrent, found, error)));
    }
  }

  private void onLookup(ReplyQueue.Slot slot, boolean concurrent, ContextLookup found, Throwable error) {
    if (host.closed()) {
      return;
    }
    if (error != null) {
      services.metrics().storeError(Metrics.StoreOperation.TAKE);
      services.warnings().storeReadFailed(error);
    }
    ContextUsage context = error == null ? found.usage().orElse(null) : null;
    if (context == null && !concurrent) {
      // Context-first: the context response would already have been stored. No context phase.
      withoutContext(
          slot, error == null ? missOutcome(found, Outcome.PASSTHROUGH_NO_CONTEXT) : Outcome.ERROR);
      return;
    }
    rewrite(slot, context);
  }

  /** The response is read and its usage rewritten; {@code context} is null until it is known. */
  private void rewrite(ReplyQueue.Slot slot, ContextUsage context) {
    rewriter = start.processors().generation(start.eventStream(), start.shape());
    if (context != null) {
      rewriter.resolveContext(context, null);
    }
    // The body may change length: the content-length Envoy saw must not reach the client.
    replies.complete(
        slot,
        EnvoyMessages.responseHeaders(
            EnvoyMessages.removeHeaders("content-length"),
            EnvoyMessages.mode(start.requestStillStreaming(), true, true),
            null));
  }

  /**
   * No context usage: the response is read and passed as the worker sent it, less a usage event the
   * service itself asked for and with a count that cannot be true clamped; or, with the clamp turned
   * off and nothing to take out, it passes unread. Either way it counts as {@code outcome} (or
   * {@code impossible_count}).
   */
  private void withoutContext(ReplyQueue.Slot slot, Outcome outcome) {
    if (start.removesInjectedUsage() || services.config().ordering().clampWithoutContext()) {
      missOutcomeRead = outcome;
      rewrite(slot, null);
      rewriter.resolveContext(null, outcome);
      return;
    }
    record.report(Phase.GENERATION, outcome);
    Struct metadata = UsageMetadata.outcomeOnly(namespace(), outcome, record.model(), record.refused());
    replies.complete(slot, EnvoyMessages.skipResponseBody(start.requestStillStreaming(), metadata));
  }

  @Override
  public void onBody(HttpBody chunk, ReplyQueue.Slot slot) {
    if (rewriter == null) {
      replies.forward(slot, chunk.getBody());
      return;
    }
    boolean end = chunk.getEndOfStream();
    byte[] bytes = BodyBytes.of(chunk.getBody());
    rewriter.accept(bytes);
    if (end) {
      rewriter.finish();
    }
    followWait();
    byte[] ready = replies.owe(slot, rewriter.takeReady());
    if (!end) {
      replies.complete(slot, replies.bodyReply(bytes, ready, releasedUsageMetadata()));
    } else if (rewriter.waiting()) {
      holdLast(slot, bytes);
    } else {
      complete(slot, bytes, ready);
    }
  }

  /** Starts the wait once the rewriter asks for the context usage, withdraws it once it gave up. */
  private void followWait() {
    if (rewriter.wantsContext() && contextWait == null) {
      awaitContext();
    } else if (contextWait != null && !contextWait.isDone() && !rewriter.waiting() && !rewriter.wantsContext()) {
      // The rewriter gave up waiting by itself (held bytes above their cap): withdraw the waiter, so
      // it holds no permit and consumes no context usage that arrives later.
      contextWait.cancel(false);
    }
  }

  /**
   * Holds the last reply until the context usage lands or the deadline passes, and has Envoy's
   * message timer run at least as long.
   */
  private void holdLast(ReplyQueue.Slot slot, byte[] lastBytes) {
    replies.hold(slot);
    if (!endCameWithTheLastBytes(lastBytes)) {
      long remaining =
          services.config().ordering().contextWait().toMillis()
              - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - contextWaitStart);
      replies.extendTimer(Math.max(1, remaining) + TIMER_MARGIN_MILLIS);
    }
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
    return lastBytes.length == 0
        && start.announcedLength() >= 0
        && record.bytesIn() == start.announcedLength();
  }

  private void awaitContext() {
    contextWaitStart = System.nanoTime();
    if (!services.waits().tryAcquire()) {
      // limits.max_waiters: too many exchanges wait already. This one does not: its usage goes out
      // as the worker wrote it, like a deadline that has passed, and the refusal is counted.
      services.metrics().waitRefused();
      contextWait = CompletableFuture.completedFuture(ContextLookup.MISS);
      rewriter.resolveContext(null, Outcome.CONTEXT_TIMEOUT);
      return;
    }
    contextWait =
        services
            .store()
            .await(start.classification().keys(), start.fingerprint(), services.config().ordering().contextWait());
    contextWait.whenComplete((found, error) -> services.waits().release());
    contextWait.whenComplete((found, error) -> host.resume(() -> onContext(found, error)));
  }

  private void onContext(ContextLookup found, Throwable error) {
    if (host.closed() || abandoned || error instanceof CancellationException) {
      return;
    }
    services.metrics().contextWaited(System.nanoTime() - contextWaitStart);
    if (error != null) {
      services.metrics().storeError(Metrics.StoreOperation.AWAIT);
      services.warnings().storeReadFailed(error);
    }
    ContextUsage context = error == null ? found.usage().orElse(null) : null;
    rewriter.resolveContext(
        context, error == null ? missOutcome(found, Outcome.CONTEXT_TIMEOUT) : Outcome.ERROR);
    ReplyQueue.Slot last = replies.held();
    if (last != null) {
      complete(last, null, replies.owe(last, rewriter.takeReady()));
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
    services.warnings().fingerprintMismatch(start.classification().keys().get(0).source());
    return Outcome.FINGERPRINT_MISMATCH;
  }

  /** The last reply: the final report goes out with it as metadata, and is counted. */
  private void complete(ReplyQueue.Slot slot, byte[] original, byte[] ready) {
    ExchangeReport report = report();
    Struct metadata = UsageMetadata.of(namespace(), report, record.model(), record.refused());
    ProcessingResponse reply = replies.bodyReply(original, ready, metadata);
    record.countGeneration(report); // after the reply is built: bytes_out includes it
    replies.complete(slot, reply);
  }

  /**
   * The metadata for a reply that hands out a usage-bearing event for the first time since the last
   * such reply, or null. A client may read that event (and {@code [DONE]}) and hang up before the
   * body's end reaches us: sglang-router does, and Envoy then resets the stream before our last
   * reply, so the metadata goes out with the usage itself, where access logs and rate limits see it
   * whatever happens next. The last reply publishes the final figures again.
   */
  private Struct releasedUsageMetadata() {
    int released = rewriter.usageReleased();
    if (released == usagePublished) {
      return null;
    }
    usagePublished = released;
    return UsageMetadata.of(namespace(), report(), record.model(), record.refused());
  }

  /**
   * The rewriter's report; for a response read without context usage, under the reason it had none
   * unless a count was clamped or the rewrite failed: a body without usage or one that does not parse is still, first of
   * all, an exchange that found no context usage, and the operator looking for those must see it.
   */
  private ExchangeReport report() {
    ExchangeReport report = rewriter.report();
    if (missOutcomeRead == null
        || report.outcome() == Outcome.IMPOSSIBLE_COUNT
        || report.outcome() == Outcome.ERROR) {
      return report;
    }
    return new ExchangeReport(missOutcomeRead, report.figures(), false, report.model());
  }

  private String namespace() {
    return services.config().metadata().namespace();
  }

  @Override
  public byte[] abandon() {
    abandoned = true;
    if (contextWait != null) {
      contextWait.cancel(false);
    }
    return rewriter == null ? Bytes.EMPTY : rewriter.abandon();
  }

  /**
   * After a usage-bearing event went out the exchange counts as that event's outcome (the client has
   * its usage); before, as {@link Outcome#RESET}. Either becomes {@link Outcome#ENVOY_GAVE_UP} when
   * Envoy's message timer had run out ({@link ExchangeRecord}).
   */
  @Override
  public void streamEnded(Phase uncounted) {
    if (contextWait != null) {
      contextWait.cancel(false);
    }
    if (uncounted == null) {
      return;
    }
    if (rewriter != null && !abandoned && rewriter.usageReleased() > 0) {
      record.countGeneration(report());
      return;
    }
    record.report(uncounted, Outcome.RESET);
  }
}
