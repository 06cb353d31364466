package io.disaggusage.extproc.rewrite;

import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.json.JsonUsageScanner;
import io.disaggusage.extproc.usage.ApiShape;
import io.disaggusage.extproc.usage.ApiShapes;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.JsonUsageRewriter;

/**
 * A non-streaming generation response (one JSON document), rewritten as it streams through
 * (behaviour.md, "JSON bodies"). A {@link JsonUsageScanner} checks the syntax and finds the usage
 * object; bytes before it go out with the reply to the chunk that carried them. From the usage
 * object's first byte on, the bytes are held: the usage object itself (up to {@code
 * limits.max_usage_bytes}) and everything after it (up to {@code limits.max_body_bytes} in all) until
 * the body has ended and proved well-formed, and, in concurrent flows, until the context usage is
 * known. Then the held bytes go out with the usage rewritten, or exactly as they came when the body
 * turned out malformed. A later usage member supersedes a held one (the last occurrence wins), which
 * then goes out unmodified. Memory per stream is the held part, not the body.
 *
 * <p>This class owns the leg's lifecycle and where scanned bytes go (its {@link Mode}); the jobs are
 * its collaborators': {@link HeldJsonBytes} (the held part and its limits), {@link JsonUsageRewrite}
 * (the usage rewrite), {@link ContextResolution} (the context usage) and {@link JsonOutcome} (the
 * report).
 */
public final class GenerationJsonRewriter implements GenerationRewriter {
  private enum Mode {
    /** Scanned bytes go out: no usage object is held. */
    FORWARD,
    /** Scanned bytes are held: the usage object being read. */
    CAPTURE,
    /** Scanned bytes are held: the usage object and what followed it. */
    HOLD,
    /** Every byte goes out as it comes: malformed, released or abandoned. */
    PASS
  }

  private final JsonUsageScanner scanner = new JsonUsageScanner(ApiShapes.usageContainers());
  private final ReadyBytes ready = new ReadyBytes();
  private final HeldJsonBytes held;
  private final ContextResolution resolved = new ContextResolution();
  private final JsonOutcome outcome = new JsonOutcome();
  private final JsonUsageRewrite usage;
  private Mode mode = Mode.FORWARD;
  private boolean finished;

  public GenerationJsonRewriter(JsonUsageRewriter rewriter, ApiShape shape, int maxBodyBytes) {
    this.held = new HeldJsonBytes(rewriter.maxUsageBytes(), maxBodyBytes);
    this.usage = new JsonUsageRewrite(rewriter, shape, resolved, outcome);
  }

  @Override
  public void accept(byte[] chunk) {
    if (mode == Mode.PASS) {
      ready.add(chunk);
      return;
    }
    int n = chunk.length;
    int from = 0; // chunk[from, i) was scanned and goes where the mode sends bytes
    int i = 0;
    while (i < n) {
      i = scanner.scan(chunk, i, n);
      switch (scanner.event()) {
        case NONE -> {}
        case USAGE_OBJECT_START -> {
          // A new usage member: whatever was held is superseded and goes out as it came.
          int at = scanner.eventIndex();
          releaseHeld();
          ready.add(chunk, from, at - from);
          from = at;
          mode = Mode.CAPTURE;
          outcome.usageOversize(false);
        }
        case USAGE_OTHER_START -> {
          releaseHeld(); // a null or non-object usage member: the last one wins, nothing to rewrite
          outcome.usageOversize(false);
        }
        case USAGE_OBJECT_END -> {
          int end = scanner.eventIndex() + 1;
          if (mode == Mode.CAPTURE) {
            if (!held.fits(end - from, true)) {
              releaseHeld();
              outcome.usageOversize(true);
            } else {
              held.add(chunk, from, end - from);
              from = end;
              held.usageEnds();
              mode = Mode.HOLD;
            }
          }
        }
        case ERROR -> {
          outcome.malformed();
          releaseHeld();
          ready.add(chunk, from, n - from);
          mode = Mode.PASS;
          return;
        }
      }
    }
    int rest = n - from;
    if (mode == Mode.FORWARD) {
      ready.add(chunk, from, rest);
    } else if (!held.fits(rest, mode == Mode.CAPTURE)) {
      releaseHeld();
      ready.add(chunk, from, rest);
      outcome.usageOversize(true);
    } else {
      held.add(chunk, from, rest);
    }
  }

  @Override
  public void finish() {
    finished = true;
    if (mode == Mode.PASS) {
      return;
    }
    if (!scanner.complete()) {
      outcome.malformed(); // truncated
      releaseHeld();
      mode = Mode.PASS;
      return;
    }
    if (mode == Mode.HOLD && resolved.known()) {
      release();
    }
  }

  @Override
  public byte[] takeReady() {
    outcome.handedOut();
    return ready.take();
  }

  @Override
  public int usageReleased() {
    return outcome.usageTaken() ? 1 : 0;
  }

  @Override
  public boolean wantsContext() {
    return waiting() && !resolved.known();
  }

  @Override
  public boolean waiting() {
    return finished && mode == Mode.HOLD;
  }

  @Override
  public void resolveContext(ContextUsage context, Outcome reasonIfNull) {
    if (resolved.resolve(context, reasonIfNull) && waiting()) {
      release();
    }
  }

  @Override
  public byte[] abandon() {
    releaseHeld();
    mode = Mode.PASS;
    return ready.take();
  }

  @Override
  public ExchangeReport report() {
    return outcome.report(scanner.modelText());
  }

  /** Bytes received and not released yet: the usage object and what followed it. */
  public int heldBytes() {
    return held.length();
  }

  /** The body ended well-formed and the context usage is known: the held bytes go out. */
  private void release() {
    byte[] out = usage.release(held);
    held.drop();
    mode = Mode.PASS;
    ready.add(out);
  }

  /** Held bytes, if any, go out unmodified and scanned bytes go out from now on. */
  private void releaseHeld() {
    held.releaseTo(ready);
    mode = Mode.FORWARD;
  }
}
