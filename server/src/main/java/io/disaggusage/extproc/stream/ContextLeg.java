package io.disaggusage.extproc.stream;

import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.classify.PromptFingerprint;
import io.disaggusage.extproc.rewrite.ContextObservation;
import io.disaggusage.extproc.rewrite.ContextObserver;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.metrics.Metrics;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import java.util.List;

/**
 * The context leg: the response passes as it comes while its observer reads the usage, which goes to
 * the store under the leg's keys as soon as the content is complete. The reply to the chunk in which
 * the usage settles waits for the store write: a client that knows the body's length (a JSON
 * response with content-length) has its whole response as soon as Envoy forwards that chunk, without
 * waiting for the end-of-stream message Envoy often sends on its own, and the orchestrator's
 * generation call may follow at once.
 */
final class ContextLeg implements Leg {
  private final ExchangeServices services;
  private final ReplyQueue replies;
  private final ExchangeRecord record;
  private final Host host;
  private final ContextObserver observer;
  private final ContextStoreKeys keys;
  /** What this leg shares with the generation leg of its flow, or null (see {@link PromptFingerprint}). */
  private final PromptFingerprint fingerprint;
  /** The usage went to the store (or was found unusable): later chunks are only forwarded. */
  private boolean settled;
  private boolean abandoned;

  ContextLeg(Tools tools, ContextObserver observer, ContextStoreKeys keys, PromptFingerprint fingerprint) {
    this.services = tools.services();
    this.replies = tools.replies();
    this.record = tools.record();
    this.host = tools.host();
    this.observer = observer;
    this.keys = keys;
    this.fingerprint = fingerprint;
  }

  @Override
  public void onBody(HttpBody chunk, ReplyQueue.Slot slot) {
    boolean end = chunk.getEndOfStream();
    byte[] bytes = BodyBytes.of(chunk.getBody());
    observer.accept(bytes);
    if (end) {
      observer.finish();
    }
    byte[] ready = replies.owe(slot, observer.takeReady());
    if (!settled && (end || observer.contentEnded())) {
      settled = true;
      store(observer.observation(), slot, bytes, ready);
      return;
    }
    replies.complete(slot, replies.bodyReply(bytes, ready, null));
  }

  private void store(ContextObservation observation, ReplyQueue.Slot slot, byte[] original, byte[] ready) {
    if (observation.usage() == null) {
      answer(slot, original, ready, observation.outcome());
      return;
    }
    record.storing(observation.usage());
    List<CorrelationKey> storeKeys = keys.with(observation.contextIds(), observation.kvRemoteRequestId());
    if (storeKeys.isEmpty()) {
      answer(slot, original, ready, Outcome.PASSTHROUGH_NO_CONTEXT);
      return;
    }
    record.storingUnder(storeKeys.get(0));
    // This reply waits for the write, and the replies behind it with it: the client cannot have the
    // whole response before the usage is in the store, so a context-first lookup finds it (§4).
    services
        .store()
        .put(storeKeys, fingerprint, observation.usage())
        .whenComplete((ok, error) -> host.resume(() -> onStored(slot, original, ready, error)));
  }

  private void onStored(ReplyQueue.Slot slot, byte[] original, byte[] ready, Throwable error) {
    if (error != null) {
      services.metrics().storeError(Metrics.StoreOperation.PUT);
      services.warnings().storeWriteFailed(error);
    }
    Outcome outcome = error == null ? Outcome.STORED : Outcome.ERROR;
    if (host.closed() || abandoned) {
      // Nothing to answer any more, or the reply already went out unmodified. Counted all the same:
      // the write landed (or failed) although the client went away meanwhile.
      record.report(Phase.CONTEXT, outcome);
      return;
    }
    replies.hold(slot); // should the answer fail, this reply owes the bytes taken for it
    answer(slot, original, ready, outcome);
  }

  /** A context chunk's reply once the exchange's outcome is known. */
  private void answer(ReplyQueue.Slot slot, byte[] original, byte[] ready, Outcome outcome) {
    ProcessingResponse reply = replies.bodyReply(original, ready, null);
    record.report(Phase.CONTEXT, outcome);
    replies.complete(slot, reply);
  }

  @Override
  public byte[] abandon() {
    abandoned = true;
    return observer.abandon();
  }

  @Override
  public void streamEnded(Phase uncounted) {
    if (uncounted != null && !settled) { // a store write under way counts itself when it lands
      record.report(uncounted, Outcome.RESET);
    }
  }
}
