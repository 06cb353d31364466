package io.disaggusage.extproc.rewrite;

import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.usage.ApiShape;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.JsonUsageRewriter;
import io.disaggusage.extproc.usage.UsageFigures;
import java.io.ByteArrayOutputStream;

/**
 * The first, holding implementation of the non-streaming generation rewrite, kept as the reference
 * for {@link GenerationJsonRewriter}: the body is held until it is complete, then its usage is
 * rewritten with the context usage (waiting for it in concurrent flows). A body above
 * {@code maxBodyBytes} is released unmodified at once and the rest passes straight through.
 */
final class BufferedJsonRewriter implements GenerationRewriter {
  private final JsonUsageRewriter rewriter;
  private final ApiShape names;
  private final int maxBodyBytes;

  private ByteArrayOutputStream body = new ByteArrayOutputStream(4096);
  private byte[] ready = new byte[0];
  private boolean passthrough;
  private boolean finished;
  private final ContextResolution resolved = new ContextResolution();
  private boolean released;
  private boolean usageTaken;
  private ExchangeReport report = new ExchangeReport(Outcome.NO_USAGE, null, false, null);

  BufferedJsonRewriter(JsonUsageRewriter rewriter, ApiShape names, int maxBodyBytes) {
    this.rewriter = rewriter;
    this.names = names;
    this.maxBodyBytes = maxBodyBytes;
  }

  @Override
  public void accept(byte[] chunk) {
    if (passthrough) {
      append(chunk);
      return;
    }
    if (body.size() + chunk.length > maxBodyBytes) {
      passthrough = true;
      report = new ExchangeReport(Outcome.OVERSIZE, null, false, null);
      append(body.toByteArray());
      append(chunk);
      body = null;
      return;
    }
    body.write(chunk, 0, chunk.length);
  }

  @Override
  public void finish() {
    finished = true;
    if (!passthrough && resolved.known()) {
      release();
    }
  }

  @Override
  public byte[] takeReady() {
    usageTaken = released; // the usage object goes out with the whole body
    byte[] out = ready;
    ready = new byte[0];
    return out;
  }

  @Override
  public int usageReleased() {
    return usageTaken ? 1 : 0;
  }

  @Override
  public boolean wantsContext() {
    return finished && !passthrough && !resolved.known();
  }

  @Override
  public boolean waiting() {
    return finished && !passthrough && !released;
  }

  @Override
  public void resolveContext(ContextUsage context, Outcome reasonIfNull) {
    if (!resolved.resolve(context, reasonIfNull)) {
      return;
    }
    if (context == null) {
      report = new ExchangeReport(resolved.fallback(), null, false, null);
    }
    if (finished && !passthrough) {
      release();
    }
  }

  private void release() {
    released = true;
    byte[] doc = body.toByteArray();
    body = null;
    try {
      rewrite(doc);
    } catch (RuntimeException e) {
      // Only this body's correction is lost: it goes out exactly as it came.
      report = new ExchangeReport(Outcome.ERROR, null, false, null);
      ready = Bytes.EMPTY;
      append(doc);
    }
  }

  private void rewrite(byte[] doc) {
    JsonUsageRewriter.Result result = rewriter.rewrite(doc, resolved.usage(), names);
    if (resolved.usage() == null && !(result instanceof JsonUsageRewriter.Rewritten)) {
      UsageFigures own = rewriter.inspect(doc, names);
      report = new ExchangeReport(report.outcome(), own, false, null);
      append(doc);
      return;
    }
    if (result instanceof JsonUsageRewriter.Rewritten r) {
      Outcome applied = resolved.usage() == null ? report.outcome() : Outcome.REWRITTEN;
      report = new ExchangeReport(r.impossible() ? Outcome.IMPOSSIBLE_COUNT : applied, r.figures(), r.corrected(), r.model());
      append(r.document());
    } else if (result instanceof JsonUsageRewriter.NoUsage n) {
      report = new ExchangeReport(Outcome.NO_USAGE, null, false, n.model());
      append(doc);
    } else {
      report = new ExchangeReport(Outcome.of((JsonUsageRewriter.Rejected) result), null, false, null);
      append(doc);
    }
  }

  @Override
  public byte[] abandon() {
    byte[] held = body == null ? new byte[0] : body.toByteArray();
    body = null;
    passthrough = true;
    byte[] out = Bytes.concat(ready, held);
    ready = new byte[0];
    return out;
  }

  @Override
  public ExchangeReport report() {
    return report;
  }

  private void append(byte[] bytes) {
    ready = ready.length == 0 ? bytes : Bytes.concat(ready, bytes);
  }
}
