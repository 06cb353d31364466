package io.disaggusage.bench;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.rewrite.BodyLimits;
import io.disaggusage.extproc.stream.CoreSettings;
import io.disaggusage.extproc.config.ConfigException;
import io.disaggusage.extproc.config.ConfigLoader;
import io.disaggusage.extproc.rewrite.ProcessorFactory;
import io.disaggusage.extproc.rewrite.ResponseBodyProcessor;
import io.disaggusage.extproc.usage.ApiShape;
import io.disaggusage.extproc.usage.ApiShapes;
import io.disaggusage.extproc.rewrite.GenerationRewriter;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.UsageDocument;
import java.math.BigInteger;
import java.util.List;
import java.util.Map;

/** The service's body processors as the server builds them, and one body run through them. */
public final class Fixtures {
  /** Above the largest benchmarked body, so every size is rewritten rather than passed as oversize. */
  public static final int MAX_BODY_BYTES = 64 * 1024 * 1024;

  public static final ApiShape CHAT = ApiShapes.forPath("/v1/chat/completions");

  /** The context worker's usage ({@link Bodies#CONTEXT_USAGE}). */
  public static final ContextUsage CONTEXT =
      new ContextUsage(BigInteger.valueOf(1013), Map.of("cached_tokens", "7"), BigInteger.valueOf(7));

  private Fixtures() {}

  /** The default limits with {@code limits.max_body_bytes} at {@link #MAX_BODY_BYTES}. */
  public static BodyLimits limits() {
    try {
      return CoreSettings.bodyLimits(ConfigLoader.fromYaml("limits:\n  max_body_bytes: " + MAX_BODY_BYTES + "\n"));
    } catch (ConfigException e) {
      throw new IllegalStateException(e);
    }
  }

  public static JsonFactory json() {
    return UsageDocument.newFactory(MAX_BODY_BYTES);
  }

  /** The factory {@code ExtProcService} builds (whatever body processors it currently returns). */
  public static ProcessorFactory processors() {
    return new ProcessorFactory(json(), limits());
  }

  /**
   * One generation response body through a fresh processor with the context usage known, chunk by
   * chunk, taking the ready bytes after each chunk as {@code ExchangeStream} does.
   *
   * @return the bytes that went out (so the work cannot be optimised away)
   */
  public static long generation(ProcessorFactory factory, boolean eventStream, List<byte[]> chunks) {
    GenerationRewriter p = factory.generation(eventStream, CHAT);
    p.resolveContext(CONTEXT, null);
    long out = 0;
    for (byte[] chunk : chunks) {
      p.accept(chunk);
      out += p.takeReady().length;
    }
    p.finish();
    return out + p.takeReady().length;
  }

  /** Like {@link #generation} but returns the output, for correctness checks. */
  public static byte[] generationOutput(ProcessorFactory factory, boolean eventStream, List<byte[]> chunks) {
    GenerationRewriter p = factory.generation(eventStream, CHAT);
    p.resolveContext(CONTEXT, null);
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    for (byte[] chunk : chunks) {
      p.accept(chunk);
      out.writeBytes(p.takeReady());
    }
    p.finish();
    out.writeBytes(p.takeReady());
    return out.toByteArray();
  }
}
