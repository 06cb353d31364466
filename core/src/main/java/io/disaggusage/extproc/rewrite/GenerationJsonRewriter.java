package io.disaggusage.extproc.rewrite;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.json.JsonUsageScanner;
import io.disaggusage.extproc.usage.ApiShape;
import io.disaggusage.extproc.usage.ApiShapes;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.JsonUsageRewriter;
import io.disaggusage.extproc.usage.UsageFigures;
import java.io.IOException;
import java.util.Arrays;

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
 */
public final class GenerationJsonRewriter implements GenerationRewriter {
  /** Decodes the model string (a short, already checked JSON string); default limits suffice. */
  private static final JsonFactory STRINGS = new JsonFactory();

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

  private final JsonUsageRewriter rewriter;
  private final ApiShape shape;
  private final int maxUsageBytes;
  private final int maxHeldBytes;
  private final JsonUsageScanner scanner = new JsonUsageScanner(ApiShapes.usageContainers());
  private final ReadyBytes ready = new ReadyBytes();

  private Mode mode = Mode.FORWARD;
  /** From the held usage object's opening brace on; {@code held[0, usageLength)} is the object. */
  private byte[] held = Bytes.EMPTY;

  private int heldLength;
  private int usageLength;
  private boolean usageOversize; // the last usage member's object was given up for its size
  private boolean malformed;
  private boolean finished;
  private final ContextResolution resolved = new ContextResolution();

  private Outcome outcome; // set when the held usage was released
  private boolean usageTaken;
  private UsageFigures figures;
  private boolean corrected;
  private byte[] modelText;
  private String model;

  public GenerationJsonRewriter(JsonUsageRewriter rewriter, ApiShape shape, int maxBodyBytes) {
    this.rewriter = rewriter;
    this.shape = shape;
    this.maxUsageBytes = rewriter.maxUsageBytes();
    this.maxHeldBytes = maxBodyBytes;
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
          usageOversize = false;
        }
        case USAGE_OTHER_START -> {
          releaseHeld(); // a null or non-object usage member: the last one wins, nothing to rewrite
          usageOversize = false;
        }
        case USAGE_OBJECT_END -> {
          int end = scanner.eventIndex() + 1;
          if (mode == Mode.CAPTURE) {
            if (heldLength + end - from > maxUsageBytes) {
              releaseHeld();
              usageOversize = true;
            } else {
              hold(chunk, from, end - from);
              from = end;
              usageLength = heldLength;
              mode = Mode.HOLD;
            }
          }
        }
        case ERROR -> {
          malformed = true;
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
    } else if (heldLength + rest > (mode == Mode.CAPTURE ? maxUsageBytes : maxHeldBytes)) {
      releaseHeld();
      ready.add(chunk, from, rest);
      usageOversize = true;
    } else {
      hold(chunk, from, rest);
    }
  }

  @Override
  public void finish() {
    finished = true;
    if (mode == Mode.PASS) {
      return;
    }
    if (!scanner.complete()) {
      malformed = true; // truncated
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
    usageTaken = outcome != null; // the usage object goes out only with everything after it
    return ready.take();
  }

  @Override
  public int usageReleased() {
    return usageTaken ? 1 : 0;
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
    if (malformed) {
      return new ExchangeReport(Outcome.PARSE_ERROR, null, false, null);
    }
    if (outcome != null) {
      return new ExchangeReport(outcome, figures, corrected, model());
    }
    return new ExchangeReport(usageOversize ? Outcome.OVERSIZE : Outcome.NO_USAGE, null, false, model());
  }

  /** Bytes received and not released yet: the usage object and what followed it. */
  public int heldBytes() {
    return heldLength;
  }

  /** The body ended well-formed and the context usage is known: the held bytes go out. */
  private void release() {
    byte[] out;
    try {
      out = rewrite();
    } catch (RuntimeException e) {
      // Only this body's correction is lost: the held bytes go out exactly as they came.
      outcome = Outcome.ERROR;
      figures = null;
      corrected = false;
      out = Arrays.copyOf(held, heldLength);
    }
    dropHeld();
    mode = Mode.PASS;
    ready.add(out);
  }

  private byte[] rewrite() {
    ContextUsage context = resolved.usage();
    JsonUsageRewriter.Result result = rewriter.rewriteObject(held, usageLength, context, shape);
    if (result instanceof JsonUsageRewriter.Rewritten r) {
      outcome = r.impossible() ? Outcome.IMPOSSIBLE_COUNT : context == null ? resolved.fallback() : Outcome.REWRITTEN;
      figures = r.figures();
      corrected = r.corrected();
      return r.corrected() ? r.edits().applyTo(held, 0, heldLength) : Arrays.copyOf(held, heldLength);
    }
    if (context == null) {
      // Left alone without context usage: the worker's own figures, under the fallback's outcome.
      figures = rewriter.inspectObject(held, usageLength, shape);
      outcome = resolved.fallback();
    } else {
      outcome = Outcome.of((JsonUsageRewriter.Rejected) result);
    }
    return Arrays.copyOf(held, heldLength);
  }

  /** Held bytes, if any, go out unmodified and scanned bytes go out from now on. */
  private void releaseHeld() {
    if (heldLength > 0) {
      ready.add(held, 0, heldLength);
    }
    dropHeld();
    mode = Mode.FORWARD;
  }

  private void dropHeld() {
    held = Bytes.EMPTY;
    heldLength = 0;
    usageLength = 0;
  }

  private void hold(byte[] chunk, int from, int n) {
    if (n == 0) {
      return;
    }
    if (held.length - heldLength < n) {
      int size = Math.max(heldLength + n, held.length == 0 ? 512 : held.length * 2);
      held = Arrays.copyOf(held, size);
    }
    System.arraycopy(chunk, from, held, heldLength, n);
    heldLength += n;
  }

  /** The last string model the body named, decoded; null if none (or not decodable). */
  private String model() {
    byte[] text = scanner.modelText();
    if (text != modelText) {
      modelText = text;
      model = text == null ? null : decode(text);
    }
    return model;
  }

  private static String decode(byte[] raw) {
    byte[] quoted = new byte[raw.length + 2];
    quoted[0] = '"';
    System.arraycopy(raw, 0, quoted, 1, raw.length);
    quoted[quoted.length - 1] = '"';
    try (JsonParser p = STRINGS.createParser(quoted)) {
      return p.nextToken() == JsonToken.VALUE_STRING ? p.getText() : null;
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }
}
