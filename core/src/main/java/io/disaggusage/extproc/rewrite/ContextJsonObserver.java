package io.disaggusage.extproc.rewrite;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.json.JsonUsageScanner;
import io.disaggusage.extproc.usage.ApiShapes;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.UsageDocument;
import java.io.ByteArrayOutputStream;

/**
 * Observes a non-streaming context response: every chunk is forwarded unchanged at once, a copy is
 * kept (up to {@code maxBodyBytes}) and read as soon as a {@link JsonUsageScanner} sees the root
 * object close, or else when the body ends (a malformed or cut body). Bytes after the root object are
 * not read: the usage may already be stored by then.
 */
public final class ContextJsonObserver extends ForwardingContextObserver {
  private final JsonFactory factory;
  private final int maxBodyBytes;
  private final JsonUsageScanner scanner = new JsonUsageScanner(ApiShapes.usageContainers());
  private ByteArrayOutputStream copy = new ByteArrayOutputStream(4096);
  private boolean rootClosed;
  private ContextObservation observation = ContextObservation.none(Outcome.NO_USAGE);

  public ContextJsonObserver(JsonFactory factory, int maxBodyBytes) {
    this.factory = factory;
    this.maxBodyBytes = maxBodyBytes;
  }

  @Override
  protected void observe(byte[] chunk) {
    if (copy == null) {
      return;
    }
    if (copy.size() + chunk.length > maxBodyBytes) {
      copy = null;
      observation = ContextObservation.none(Outcome.OVERSIZE);
      return;
    }
    copy.write(chunk, 0, chunk.length);
    if (closesRoot(chunk)) {
      observeEnd();
      rootClosed = true;
    }
  }

  /** Scans the chunk; true once the root object has closed (whitespace may follow). */
  private boolean closesRoot(byte[] chunk) {
    int i = 0;
    while (i < chunk.length && !scanner.failed()) {
      i = scanner.scan(chunk, i, chunk.length);
    }
    return scanner.complete();
  }

  @Override
  protected void observeEnd() {
    if (copy != null) {
      observation = observe(factory, copy.toByteArray());
      copy = null;
    }
  }

  @Override
  public boolean contentEnded() {
    return rootClosed;
  }

  /** Reads context usage and ids from one complete JSON document. */
  static ContextObservation observe(JsonFactory factory, byte[] doc) {
    return observe(factory, doc, false);
  }

  /**
   * Reads context usage and ids from one complete JSON document. With {@code promptlessIsNoUsage}, a
   * usage object that states no prompt count counts as no usage: in a stream, an Anthropic
   * {@code message_delta} may carry {@code output_tokens} alone, leaving the prompt counts of
   * {@code message_start} in force.
   */
  static ContextObservation observe(JsonFactory factory, byte[] doc, boolean promptlessIsNoUsage) {
    UsageDocument parsed;
    try {
      parsed = UsageDocument.parse(factory, doc);
    } catch (UsageDocument.MalformedException e) {
      return ContextObservation.none(Outcome.PARSE_ERROR);
    }
    if (parsed.usage() == null || (promptlessIsNoUsage && !ApiShapes.statesPrompt(parsed.usage()))) {
      return new ContextObservation(
          null, parsed.contextIds(), parsed.kvRemoteRequestId(), parsed.model(), Outcome.NO_USAGE);
    }
    ContextUsage usage = ApiShapes.context(parsed.usage(), doc).orElse(null);
    return new ContextObservation(
        usage,
        parsed.contextIds(),
        parsed.kvRemoteRequestId(),
        parsed.model(),
        usage == null ? Outcome.PARSE_ERROR : Outcome.STORED);
  }

  @Override
  public ContextObservation observation() {
    return observation;
  }
}
