package io.disaggusage.extproc.rewrite;

import static io.disaggusage.extproc.testing.Text.text;
import static io.disaggusage.extproc.testing.Text.utf8;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.usage.ApiShapes;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.JsonUsageRewriter;
import io.disaggusage.extproc.usage.UsageDocument;
import io.disaggusage.extproc.usage.UsageFigures;
import java.io.ByteArrayOutputStream;
import java.math.BigInteger;
import java.util.Arrays;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** What is held when, in the streaming JSON rewrite (behaviour.md, "JSON bodies"). */
class GenerationJsonRewriterTest {
  static final JsonFactory JSON = UsageDocument.newFactory(1 << 20);
  static final ContextUsage CTX =
      new ContextUsage(BigInteger.valueOf(101), Map.of("cached_tokens", "7"), BigInteger.valueOf(7));
  static final String USAGE = JsonBodies.USAGE;
  static final String FIXED = USAGE.replace("\"cached_tokens\":101", "\"cached_tokens\":7");

  static GenerationJsonRewriter rewriter(int maxUsage, int maxBody) {
    return new GenerationJsonRewriter(new JsonUsageRewriter(JSON, maxUsage), ApiShapes.CHAT, maxBody);
  }

  /** What {@code p} lets go of once it has taken {@code chunk}. */
  static String released(GenerationJsonRewriter p, String chunk) {
    p.accept(utf8(chunk));
    return text(p.takeReady());
  }

  /** A rewriter with the default caps (64 KiB usage, 1 MiB body) whose context usage {@code CTX} is known. */
  static GenerationJsonRewriter withContext() {
    GenerationJsonRewriter p = rewriter(64 * 1024, 1 << 20);
    p.resolveContext(CTX, null);
    return p;
  }

  @Test
  void aSixteenMebibyteBodyPassesWithOnlyTheUsageObjectHeld() {
    GenerationJsonRewriter p = withContext(); // the body is 16× max_body_bytes
    byte[] element = utf8("{\"token\":\"tok \\\"x\\\" é\",\"logprob\":-0.0123e-4,\"bytes\":[116,111,107],\"top_logprobs\":[]},");
    byte[] head = utf8("{\"id\":\"big\",\"model\":\"m\",\"choices\":[{\"index\":0,\"logprobs\":{\"content\":[");
    byte[] tail = utf8("{}]},\"finish_reason\":\"stop\"}],\"usage\":" + USAGE + "}\n");
    int chunkSize = 64 * 1024;
    long total = 0;
    long out = 0;
    int maxHeld = 0;
    ByteArrayOutputStream last = new ByteArrayOutputStream();
    ByteArrayOutputStream pending = new ByteArrayOutputStream();
    pending.writeBytes(head);
    while (total + pending.size() < 16L << 20) {
      while (pending.size() < chunkSize) {
        pending.writeBytes(element);
      }
      byte[] chunk = pending.toByteArray();
      pending.reset();
      p.accept(chunk);
      byte[] ready = p.takeReady();
      assertThat(ready).isSameAs(chunk); // forwarded whole, without a copy
      total += chunk.length;
      out += ready.length;
      maxHeld = Math.max(maxHeld, p.heldBytes());
    }
    pending.writeBytes(tail);
    byte[] end = pending.toByteArray();
    p.accept(end);
    last.writeBytes(p.takeReady());
    maxHeld = Math.max(maxHeld, p.heldBytes());
    assertThat(p.heldBytes()).isEqualTo(USAGE.length() + 2); // the usage object, "}" and "\n"
    p.finish();
    last.writeBytes(p.takeReady());
    total += end.length;
    out += last.size();
    assertThat(total).isGreaterThanOrEqualTo(16L << 20);
    assertThat(out).isEqualTo(total - (USAGE.length() - FIXED.length()));
    assertThat(maxHeld).isEqualTo(USAGE.length() + 2);
    String endText = text(end);
    assertThat(text(last.toByteArray())).isEqualTo(endText.replace(USAGE, FIXED));
    assertThat(p.report().outcome()).isEqualTo(Outcome.REWRITTEN);
    assertThat(p.report().model()).isEqualTo("m");
    assertThat(p.heldBytes()).isZero();
  }

  @Test
  void chunksBeforeUsageAreForwardedAsTheyAreAndOnlyTheSplitChunkIsCopied() {
    GenerationJsonRewriter p = withContext();
    String doc = "{\"id\":\"a\",\"choices\":[],\"usage\":" + USAGE + "}";
    int usage = doc.indexOf(USAGE);
    byte[] first = utf8(doc.substring(0, 10));
    byte[] second = utf8(doc.substring(10, usage + 5));
    byte[] third = utf8(doc.substring(usage + 5));
    p.accept(first);
    assertThat(p.takeReady()).isSameAs(first);
    p.accept(second);
    assertThat(text(p.takeReady())).isEqualTo(doc.substring(10, usage));
    assertThat(p.heldBytes()).isEqualTo(5);
    p.accept(third);
    assertThat(p.takeReady()).isEmpty(); // the usage object is complete, the body is not yet
    p.accept(new byte[0]);
    assertThat(p.takeReady()).isEmpty();
    p.finish();
    assertThat(text(p.takeReady())).isEqualTo(FIXED + "}");
  }

  @Test
  void malformationAfterUsageReleasesTheOriginalBytes() {
    for (String bad : new String[] {"}", " x", "\u0000", " {}"}) {
      GenerationJsonRewriter p = withContext();
      String doc = "{\"id\":\"a\",\"usage\":" + USAGE + ",\"n\":1}\n";
      assertThat(released(p, doc)).isEqualTo("{\"id\":\"a\",\"usage\":");
      assertThat(p.heldBytes()).isEqualTo(doc.length() - doc.indexOf(USAGE));
      p.accept(utf8(bad));
      // The rewritten usage never left; the original goes out with the offending bytes.
      assertThat(text(p.takeReady())).isEqualTo(doc.substring(doc.indexOf(USAGE)) + bad);
      assertThat(p.heldBytes()).isZero();
      assertThat(released(p, "more")).isEqualTo("more");
      p.finish();
      assertThat(p.takeReady()).isEmpty();
      assertThat(p.report().outcome()).isEqualTo(Outcome.PARSE_ERROR);
    }
  }

  @Test
  void aTruncatedBodyReleasesTheOriginalAtTheEnd() {
    GenerationJsonRewriter p = withContext();
    String doc = "{\"usage\":" + USAGE + ",\"x\":[1,2";
    assertThat(released(p, doc)).isEqualTo("{\"usage\":");
    p.finish();
    assertThat(text(p.takeReady())).isEqualTo(doc.substring("{\"usage\":".length()));
    assertThat(p.report().outcome()).isEqualTo(Outcome.PARSE_ERROR);
    assertThat(p.waiting()).isFalse();
  }

  @Test
  void aDuplicateUsageMemberReleasesTheFirstOneUnmodifiedAndRewritesTheLast() {
    GenerationJsonRewriter p = withContext();
    String first = "{\"usage\":" + USAGE + ",\"id\":\"a\",";
    assertThat(released(p, first)).isEqualTo("{\"usage\":");
    assertThat(released(p, "\"usage\":" + USAGE + "}")).isEqualTo(USAGE + ",\"id\":\"a\",\"usage\":");
    p.finish();
    assertThat(text(p.takeReady())).isEqualTo(FIXED + "}");
    assertThat(p.report().outcome()).isEqualTo(Outcome.REWRITTEN);
  }

  @Test
  void anOversizeUsageObjectIsReleasedAsSoonAsItCrossesTheCap() {
    GenerationJsonRewriter p = rewriter(64, 1 << 20);
    p.resolveContext(CTX, null);
    String doc = "{\"id\":\"a\",\"usage\":" + USAGE + ",\"z\":1}";
    int usage = doc.indexOf(USAGE);
    assertThat(released(p, doc.substring(0, usage + 60))).isEqualTo(doc.substring(0, usage));
    assertThat(p.heldBytes()).isEqualTo(60);
    assertThat(released(p, doc.substring(usage + 60, usage + 70))).isEqualTo(doc.substring(usage, usage + 70));
    assertThat(p.heldBytes()).isZero();
    assertThat(released(p, doc.substring(usage + 70))).isEqualTo(doc.substring(usage + 70));
    p.finish();
    assertThat(p.takeReady()).isEmpty();
    assertThat(p.report().outcome()).isEqualTo(Outcome.OVERSIZE);
    assertThat(p.wantsContext()).isFalse();
  }

  @Test
  void theHeldPartIsBoundedByMaxBodyBytes() {
    GenerationJsonRewriter p = rewriter(64 * 1024, 300);
    p.resolveContext(CTX, null);
    String doc = "{\"usage\":" + USAGE + ",\"choices\":[\"" + "x".repeat(400) + "\"]}";
    byte[] bytes = utf8(doc);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    int maxHeld = 0;
    for (int i = 0; i < bytes.length; i += 50) {
      p.accept(Arrays.copyOfRange(bytes, i, Math.min(bytes.length, i + 50)));
      out.writeBytes(p.takeReady());
      maxHeld = Math.max(maxHeld, p.heldBytes());
    }
    p.finish();
    out.writeBytes(p.takeReady());
    assertThat(maxHeld).isLessThanOrEqualTo(300);
    assertThat(text(out.toByteArray())).isEqualTo(doc);
    assertThat(p.report().outcome()).isEqualTo(Outcome.OVERSIZE);

    // A body far above max_body_bytes whose usage comes last is rewritten: only its end is held.
    GenerationJsonRewriter q = rewriter(64 * 1024, 300);
    q.resolveContext(CTX, null);
    String late = "{\"choices\":[\"" + "x".repeat(4000) + "\"],\"usage\":" + USAGE + "}";
    assertThat(JsonBodyProcessorsTest.feed(q, late, 50)).isEqualTo(late.replace(USAGE, FIXED));
    assertThat(q.report().outcome()).isEqualTo(Outcome.REWRITTEN);
  }

  @Test
  void concurrentFlowWaitsOnlyWhenThereIsAUsageObjectToRewrite() {
    String[] nothingToRewrite = {
      "{\"id\":\"a\",\"usage\":null}", "{\"id\":\"a\"}", "{\"usage\":" + USAGE + "", "[1]",
      "{\"usage\":" + JsonBodies.BIG_USAGE + "}",
    };
    for (String doc : nothingToRewrite) {
      GenerationJsonRewriter p = rewriter(512, 1 << 20);
      assertThat(JsonBodyProcessorsTest.feed(p, doc, 7)).isEqualTo(doc);
      assertThat(p.wantsContext()).as(doc).isFalse();
      assertThat(p.waiting()).as(doc).isFalse();
    }
    GenerationJsonRewriter p = rewriter(512, 1 << 20);
    String doc = "{\"model\":\"m\",\"usage\":" + USAGE + "}";
    assertThat(released(p, doc)).isEqualTo("{\"model\":\"m\",\"usage\":");
    assertThat(p.wantsContext()).isFalse(); // the wait starts at the end of the body (behaviour.md §4)
    p.finish();
    assertThat(p.wantsContext()).isTrue();
    assertThat(p.takeReady()).isEmpty();
    p.resolveContext(null, Outcome.CONTEXT_TIMEOUT);
    assertThat(text(p.takeReady())).isEqualTo(USAGE + "}");
    assertThat(p.report())
        .isEqualTo(
            new ExchangeReport(
                Outcome.CONTEXT_TIMEOUT,
                new UsageFigures(
                    BigInteger.valueOf(101), BigInteger.valueOf(101), BigInteger.valueOf(13), BigInteger.valueOf(114),
                    BigInteger.valueOf(101)),
                false,
                "m"));
  }

  @Test
  void abandonGivesBackEveryByteNotYetForwardedInOrder() {
    GenerationJsonRewriter p = rewriter(64 * 1024, 1 << 20);
    String doc = "{\"id\":\"a\",\"usage\":" + USAGE + ",\"x\":1}";
    int usage = doc.indexOf(USAGE);
    p.accept(utf8(doc.substring(0, usage + 3)));
    p.accept(utf8(doc.substring(usage + 3)));
    // Nothing taken yet: the forwarded prefix, then the held usage and tail, exactly as they came.
    assertThat(text(p.abandon())).isEqualTo(doc);
    assertThat(released(p, "!")).isEqualTo("!");
  }
}
