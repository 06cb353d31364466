package io.disaggusage.extproc.rewrite;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.usage.ApiShape;
import io.disaggusage.extproc.usage.ApiShapes;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.JsonUsageRewriter;
import io.disaggusage.extproc.usage.UsageDocument;
import java.io.ByteArrayOutputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The streaming rewriter over every chunking: the bytes that leave are the same whatever the chunk
 * boundaries, content is never held when the context usage is known, and usage events are rewritten.
 */
class GenerationSseRewriterTest {
  static final ContextUsage CTX =
      new ContextUsage(BigInteger.valueOf(128), Map.of("cached_tokens", "9"), BigInteger.valueOf(9));

  static final String CONTENT =
      "data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"hello\"},\"index\":0}],\"model\":\"test-model\"}\n\n";
  static final String USAGE =
      "data: {\"choices\":[],\"model\":\"test-model\",\"usage\":{\"prompt_tokens\":128,\"completion_tokens\":5,\"total_tokens\":133,\"prompt_tokens_details\":{\"cached_tokens\":128}}}\n\n";
  static final String USAGE_FIXED = USAGE.replace("{\"cached_tokens\":128}", "{\"cached_tokens\":9}");
  static final String DONE = "data: [DONE]\n\n";

  static GenerationSseRewriter rewriter() {
    return rewriter(ApiShapes.CHAT);
  }

  static GenerationSseRewriter rewriter(ApiShape names) {
    var json = UsageDocument.newFactory(1 << 20);
    return new GenerationSseRewriter(new JsonUsageRewriter(json, 65536), json, names, 1 << 16, 1 << 20);
  }

  /** Runs the stream in the given chunks with the context known from the start; returns the output. */
  static String run(List<byte[]> chunks, ContextUsage ctx) {
    return run(chunks, ctx, ApiShapes.CHAT);
  }

  static String run(List<byte[]> chunks, ContextUsage ctx, ApiShape names) {
    GenerationSseRewriter r = rewriter(names);
    r.resolveContext(ctx, null);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (byte[] c : chunks) {
      r.accept(c);
      out.writeBytes(r.takeReady());
    }
    r.finish();
    out.writeBytes(r.takeReady());
    assertThat(r.waiting()).isFalse();
    return out.toString(StandardCharsets.UTF_8);
  }

  static List<byte[]> split(String s, int... at) {
    byte[] b = s.getBytes(StandardCharsets.UTF_8);
    List<byte[]> chunks = new ArrayList<>();
    int prev = 0;
    for (int i : at) {
      chunks.add(java.util.Arrays.copyOfRange(b, prev, i));
      prev = i;
    }
    chunks.add(java.util.Arrays.copyOfRange(b, prev, b.length));
    return chunks;
  }

  /** Every pair of split points (the second every {@code step} bytes) gives {@code expected}. */
  static void assertEveryTwoSplits(String stream, String expected, int step, ContextUsage ctx, ApiShape names) {
    int len = stream.length();
    for (int i = 0; i <= len; i++) {
      for (int j = i; j <= len; j += step) {
        assertThat(run(split(stream, i, j), ctx, names)).as("splits %d,%d", i, j).isEqualTo(expected);
      }
    }
  }

  /** 2000 random multi-splits of the stream with CRLF line ends give {@code expected} with CRLF. */
  static void assertRandomSplitsWithCrlf(String stream, String expected, ContextUsage ctx, ApiShape names) {
    String crlf = stream.replace("\n", "\r\n");
    long seed = System.nanoTime();
    Random random = new Random(seed);
    for (int n = 0; n < 2000; n++) {
      int[] at = random.ints(random.nextInt(12), 0, crlf.length() + 1).sorted().toArray();
      assertThat(run(split(crlf, at), ctx, names)).as("seed %d run %d", seed, n).isEqualTo(expected.replace("\n", "\r\n"));
    }
  }

  @Test
  void g7EveryTwoSplitPointsGiveTheSameBytes() {
    assertEveryTwoSplits(CONTENT + USAGE + DONE, CONTENT + USAGE_FIXED + DONE, 7, CTX, ApiShapes.CHAT);
  }

  @Test
  void randomMultiSplitsAndCrlf() {
    assertRandomSplitsWithCrlf(CONTENT + USAGE + DONE, CONTENT + USAGE_FIXED + DONE, CTX, ApiShapes.CHAT);
  }

  @Test
  void contentIsForwardedInTheChunkWhereItCompletes() {
    GenerationSseRewriter r = rewriter();
    r.resolveContext(CTX, null);
    r.accept(CONTENT.getBytes(StandardCharsets.UTF_8));
    assertThat(new String(r.takeReady(), StandardCharsets.UTF_8)).isEqualTo(CONTENT);
  }

  @Test
  void continuousUsageEveryEventRewritten() {
    String e1 =
        "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":{\"prompt_tokens\":128,\"completion_tokens\":1,\"total_tokens\":129,\"prompt_tokens_details\":{\"cached_tokens\":127}}}\n\n";
    String e2 = e1.replace("\"completion_tokens\":1,\"total_tokens\":129", "\"completion_tokens\":2,\"total_tokens\":130");
    String out = run(split(e1 + e2 + DONE, 10, 200), CTX);
    assertThat(out)
        .isEqualTo(
            e1.replace("\"cached_tokens\":127", "\"cached_tokens\":9")
                + e2.replace("\"cached_tokens\":127", "\"cached_tokens\":9")
                + DONE);
  }

  @Test
  void generationFirstHoldsFromTheFirstUsageEventOnly() {
    GenerationSseRewriter r = rewriter();
    r.accept((CONTENT + USAGE.substring(0, 30)).getBytes(StandardCharsets.UTF_8));
    // The usage event's start (before its "usage" key) cannot change: it leaves with its chunk.
    assert !USAGE.substring(0, 30).contains("\"usage\"");
    assertThat(new String(r.takeReady(), StandardCharsets.UTF_8)).isEqualTo(CONTENT + USAGE.substring(0, 30));
    assertThat(r.wantsContext()).isFalse();
    r.accept((USAGE.substring(30) + DONE).getBytes(StandardCharsets.UTF_8));
    // Up to its "usage" key the event leaves now; from the key on it waits.
    int key = USAGE.indexOf("\"usage\"");
    assertThat(new String(r.takeReady(), StandardCharsets.UTF_8)).isEqualTo(USAGE.substring(30, key));
    assertThat(r.wantsContext()).isTrue();
    r.finish();
    assertThat(r.waiting()).isTrue();
    r.resolveContext(CTX, null);
    assertThat(new String(r.takeReady(), StandardCharsets.UTF_8)).isEqualTo(USAGE_FIXED.substring(key) + DONE);
    assertThat(r.report().outcome()).isEqualTo(Outcome.REWRITTEN);
    assertThat(r.report().corrected()).isTrue();
    assertThat(r.report().figures().cached()).isEqualTo(BigInteger.valueOf(9));
    assertThat(r.report().figures().reportedCached()).isEqualTo(BigInteger.valueOf(128));
  }

  @Test
  void aContentEventCutByAChunkBoundaryLeavesWithItsChunk() {
    GenerationSseRewriter r = rewriter();
    r.resolveContext(CTX, null);
    byte[] all = (CONTENT + CONTENT + USAGE + DONE).getBytes(StandardCharsets.UTF_8);
    int cut = CONTENT.length() + 17; // inside the second content event
    byte[] first = java.util.Arrays.copyOfRange(all, 0, cut);
    r.accept(first);
    assertThat(r.takeReady()).isEqualTo(first); // exactly the chunk: Envoy needs no body mutation
    int cut2 = (CONTENT + CONTENT).length() + 20; // inside the usage event, before its "usage" key
    byte[] second = java.util.Arrays.copyOfRange(all, cut, cut2);
    r.accept(second);
    assertThat(r.takeReady()).isEqualTo(second);
    byte[] rest = java.util.Arrays.copyOfRange(all, cut2, all.length);
    r.accept(rest);
    r.finish();
    assertThat(new String(r.takeReady(), StandardCharsets.UTF_8))
        .isEqualTo(USAGE_FIXED.substring(20) + DONE);
  }

  @Test
  void chunksWithoutAUsageKeyLeaveAsTheCallersOwnArrays() {
    for (boolean contextKnown : new boolean[] {true, false}) {
      GenerationSseRewriter r = rewriter();
      if (contextKnown) {
        r.resolveContext(CTX, null);
      }
      byte[] all = (CONTENT.repeat(5) + USAGE + DONE).getBytes(StandardCharsets.UTF_8);
      int usageKey = (CONTENT.repeat(5) + USAGE).indexOf("\"usage\"");
      // Cuts inside content events, one between "usa" and "ge": every chunk before the key leaves
      // as the very array given, with nothing copied; the straddled key is still found.
      int[] cuts = {CONTENT.length() + 17, 2 * CONTENT.length(), 4 * CONTENT.length() + 3, usageKey + 4};
      int prev = 0;
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      for (int cut : cuts) {
        byte[] chunk = java.util.Arrays.copyOfRange(all, prev, cut);
        r.accept(chunk);
        byte[] ready = r.takeReady();
        if (cut < usageKey) {
          assertThat(ready).as("chunk ending at %d", cut).isSameAs(chunk);
        }
        out.writeBytes(ready);
        prev = cut;
      }
      r.accept(java.util.Arrays.copyOfRange(all, prev, all.length));
      r.finish();
      out.writeBytes(r.takeReady());
      if (!contextKnown) {
        assertThat(r.wantsContext()).isTrue();
        r.resolveContext(CTX, null);
        out.writeBytes(r.takeReady());
      }
      assertThat(out.toString(StandardCharsets.UTF_8)).isEqualTo(CONTENT.repeat(5) + USAGE_FIXED + DONE);
    }
  }

  @Test
  void deadlineReleasesTheWorkersUsageUnchanged() {
    GenerationSseRewriter r = rewriter();
    r.accept((CONTENT + USAGE + DONE).getBytes(StandardCharsets.UTF_8));
    r.finish();
    // Content, and the usage event up to its "usage" key (a rewrite never changes those bytes).
    int key = USAGE.indexOf("\"usage\"");
    assertThat(new String(r.takeReady(), StandardCharsets.UTF_8)).isEqualTo(CONTENT + USAGE.substring(0, key));
    r.resolveContext(null, Outcome.CONTEXT_TIMEOUT);
    assertThat(new String(r.takeReady(), StandardCharsets.UTF_8)).isEqualTo(USAGE.substring(key) + DONE);
    assertThat(r.report().outcome()).isEqualTo(Outcome.CONTEXT_TIMEOUT);
    assertThat(r.report().figures().cached()).isEqualTo(BigInteger.valueOf(128));
  }

  @Test
  void abandonGivesBackEveryHeldByteAsItCame() {
    GenerationSseRewriter r = rewriter();
    String stream = CONTENT + USAGE + DONE.substring(0, 4);
    r.accept(stream.getBytes(StandardCharsets.UTF_8));
    String first = new String(r.takeReady(), StandardCharsets.UTF_8);
    String rest = new String(r.abandon(), StandardCharsets.UTF_8);
    assertThat(first + rest).isEqualTo(stream);
  }

  @Test
  void malformedUsageEventPassesAndIsCounted() {
    String bad = "data: {\"usage\":{\"prompt_tokens\":1,\"completion_tokens_details\":{}}}\n\n";
    assertThat(run(split(CONTENT + bad + DONE, 3), CTX)).isEqualTo(CONTENT + bad + DONE);
    GenerationSseRewriter r = rewriter();
    r.resolveContext(CTX, null);
    r.accept(bad.getBytes(StandardCharsets.UTF_8));
    r.finish();
    assertThat(r.report().outcome()).isEqualTo(Outcome.PARSE_ERROR);
  }

  /**
   * vLLM may split its final usage over two events: the last content event with the counts, then the
   * usage-only event with the details. Each keeps its own shape; the details go to the second only.
   */
  @Test
  void usageSplitOverTwoEventsKeepsEachEventsShape() {
    ContextUsage ctx = new ContextUsage(BigInteger.valueOf(128),
        new java.util.LinkedHashMap<>(Map.of("cached_tokens", "9")), BigInteger.valueOf(9));
    String first = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],"
        + "\"usage\":{\"prompt_tokens\":130,\"completion_tokens\":5}}\n\n";
    String stream = CONTENT + first + USAGE + DONE;
    String expected = CONTENT + first.replace("130", "128") + USAGE_FIXED + DONE;
    assertEveryTwoSplits(stream, expected, 17, ctx, ApiShapes.CHAT);
  }

  @Test
  void impossibleCountsGoOutCorrectedWithTheirOwnOutcome() {
    String forged = USAGE.replace("{\"cached_tokens\":128}", "{\"cached_tokens\":-5}");
    assertThat(run(split(CONTENT + forged + DONE, 40), CTX)).isEqualTo(CONTENT + USAGE_FIXED + DONE);
    GenerationSseRewriter r = rewriter();
    r.resolveContext(CTX, null);
    r.accept((CONTENT + forged + DONE).getBytes(StandardCharsets.UTF_8));
    r.finish();
    ExchangeReport report = r.report();
    assertThat(report.outcome()).isEqualTo(Outcome.IMPOSSIBLE_COUNT);
    assertThat(report.corrected()).isTrue();
    assertThat(report.figures().cached()).isEqualTo(BigInteger.valueOf(9));
    assertThat(report.figures().reportedCached()).isEqualTo(BigInteger.valueOf(-5));
  }

  @Test
  void withoutContextImpossibleCountsAreClampedAndCounted() {
    String doubled = USAGE.replace("{\"cached_tokens\":128}", "{\"cached_tokens\":256}");
    GenerationSseRewriter r = rewriter();
    r.accept((CONTENT + doubled + DONE).getBytes(StandardCharsets.UTF_8));
    r.finish();
    assertThat(r.wantsContext()).isTrue();
    r.resolveContext(null, null);
    assertThat(new String(r.takeReady(), StandardCharsets.UTF_8)).isEqualTo(CONTENT + USAGE + DONE);
    assertThat(r.report().outcome()).isEqualTo(Outcome.IMPOSSIBLE_COUNT);
    assertThat(r.report().figures().cached()).isEqualTo(BigInteger.valueOf(128));

    GenerationSseRewriter possible = rewriter();
    possible.accept((CONTENT + USAGE + DONE).getBytes(StandardCharsets.UTF_8));
    possible.finish();
    possible.resolveContext(null, null);
    assertThat(new String(possible.takeReady(), StandardCharsets.UTF_8)).isEqualTo(CONTENT + USAGE + DONE);
    assertThat(possible.report().outcome()).isEqualTo(Outcome.CONTEXT_TIMEOUT);
    assertThat(possible.report().corrected()).isFalse();
  }

  @Test
  void responsesApiNamedEventsWithoutDone() {
    String delta = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n";
    String completed =
        "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"usage\":{\"input_tokens\":128,\"output_tokens\":8,\"total_tokens\":136,\"input_tokens_details\":{\"cached_tokens\":128},\"output_tokens_details\":{\"reasoning_tokens\":3}}}}\n\n";
    var json = UsageDocument.newFactory(1 << 20);
    GenerationSseRewriter r =
        new GenerationSseRewriter(new JsonUsageRewriter(json, 65536), json, ApiShapes.RESPONSES, 1 << 16, 1 << 20);
    r.resolveContext(CTX, null);
    r.accept((delta + completed).getBytes(StandardCharsets.UTF_8));
    r.finish();
    assertThat(new String(r.takeReady(), StandardCharsets.UTF_8))
        .isEqualTo(delta + completed.replace("{\"cached_tokens\":128}", "{\"cached_tokens\":9}"));
  }

  @Test
  void holdingIsBounded() {
    var json = UsageDocument.newFactory(1 << 20);
    GenerationSseRewriter r =
        new GenerationSseRewriter(new JsonUsageRewriter(json, 65536), json, ApiShapes.CHAT, 4096, 1024);
    StringBuilder all = new StringBuilder(USAGE);
    r.accept(USAGE.getBytes(StandardCharsets.UTF_8));
    StringBuilder out = new StringBuilder(new String(r.takeReady(), StandardCharsets.UTF_8));
    for (int i = 0; i < 20; i++) {
      r.accept(CONTENT.getBytes(StandardCharsets.UTF_8));
      all.append(CONTENT);
      out.append(new String(r.takeReady(), StandardCharsets.UTF_8));
    }
    assertThat(out.toString()).isEqualTo(all.toString());
    assertThat(r.waiting()).isFalse();
    assertThat(r.report().outcome()).isEqualTo(Outcome.OVERSIZE);
  }
}
