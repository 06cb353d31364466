package io.disaggusage.extproc.rewrite;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.sse.SseEvent;
import io.disaggusage.extproc.sse.SseFramer;
import io.disaggusage.extproc.sse.SseItem;
import io.disaggusage.extproc.usage.ContextUsage;
import java.util.List;

/**
 * Observes a streaming context response (SGLang prefill streams when its client streamed; Anthropic
 * Messages streams): every chunk is forwarded unchanged at once; the usage of the last event whose
 * usage states a prompt count is kept, up to the stream's last event ({@link SseEvent#endsStream()}),
 * after which nothing changes it.
 */
public final class ContextSseObserver extends ForwardingContextObserver {
  private final JsonFactory json;
  private final SseFramer framer;
  private ContextUsage usage;
  private List<String> ids = List.of();
  private String model;
  private Outcome outcome = Outcome.NO_USAGE;
  private boolean lastEventSeen;

  public ContextSseObserver(JsonFactory json, int maxEventBytes) {
    this.json = json;
    this.framer = new SseFramer(maxEventBytes, this::onItem);
  }

  @Override
  protected void observe(byte[] chunk) {
    framer.feed(chunk);
  }

  @Override
  protected void observeEnd() {
    framer.finish();
  }

  private void onItem(SseItem item) {
    if (lastEventSeen || !(item instanceof SseEvent event) || !event.hasData()) {
      return;
    }
    lastEventSeen = event.endsStream();
    if (!event.mayContainUsage()) {
      return;
    }
    ContextObservation seen = ContextJsonObserver.observe(json, event.payloadBytes(), true);
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
  public boolean contentEnded() {
    return lastEventSeen;
  }

  @Override
  public ContextObservation observation() {
    return new ContextObservation(usage, ids, model, outcome);
  }
}
