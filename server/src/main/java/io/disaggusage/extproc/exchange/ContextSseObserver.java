package io.disaggusage.extproc.exchange;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.sse.SseEvent;
import io.disaggusage.extproc.sse.SseFramer;
import io.disaggusage.extproc.sse.SseItem;
import io.disaggusage.extproc.usage.ContextUsage;
import java.util.List;

/**
 * Observes a streaming context response (SGLang prefill streams when its client streamed): every
 * chunk is forwarded unchanged at once; the usage of the last usage-bearing event is kept.
 */
public final class ContextSseObserver implements ContextObserver {
  private final JsonFactory json;
  private final SseFramer framer;
  private byte[] ready = Bytes.EMPTY;
  private boolean abandoned;
  private ContextUsage usage;
  private List<String> ids = List.of();
  private String model;
  private Outcome outcome = Outcome.NO_USAGE;

  public ContextSseObserver(JsonFactory json, int maxEventBytes) {
    this.json = json;
    this.framer = new SseFramer(maxEventBytes, this::onItem);
  }

  @Override
  public void accept(byte[] chunk) {
    ready = Bytes.concat(ready, chunk);
    if (!abandoned) {
      framer.feed(chunk);
    }
  }

  @Override
  public void finish() {
    if (!abandoned) {
      framer.finish();
    }
  }

  private void onItem(SseItem item) {
    if (!(item instanceof SseEvent event) || !event.hasData() || !event.mayContainUsage()) {
      return;
    }
    ContextObservation seen = ContextJsonObserver.observe(json, event.payloadBytes());
    if (seen.model() != null) {
      model = seen.model();
    }
    if (!seen.contextIds().isEmpty()) {
      ids = seen.contextIds();
    }
    if (seen.outcome() != Outcome.NO_USAGE) {
      usage = seen.usage();
      outcome = seen.outcome();
    }
  }

  @Override
  public ContextObservation observation() {
    return new ContextObservation(usage, ids, model, outcome);
  }

  @Override
  public byte[] takeReady() {
    byte[] out = ready;
    ready = Bytes.EMPTY;
    return out;
  }

  @Override
  public boolean wantsContext() {
    return false;
  }

  @Override
  public boolean waiting() {
    return false;
  }

  @Override
  public void resolveContext(ContextUsage context, Outcome reasonIfNull) {}

  @Override
  public byte[] abandon() {
    abandoned = true;
    return takeReady();
  }

  @Override
  public ExchangeReport report() {
    return new ExchangeReport(outcome, null, false, model);
  }
}
