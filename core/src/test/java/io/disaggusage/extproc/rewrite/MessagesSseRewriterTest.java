package io.disaggusage.extproc.rewrite;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.testkit.Wire;
import io.disaggusage.extproc.usage.ApiShapes;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.UsageDocument;
import io.disaggusage.extproc.usage.UsageFigures;
import java.io.ByteArrayOutputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Anthropic Messages streams through the generation rewriter and the context observer: the usage of
 * {@code message_start} (inside {@code message}) and of {@code message_delta} is rewritten, every other
 * event leaves byte for byte, whatever the chunking.
 */
class MessagesSseRewriterTest {
  /** The context worker's usage: 186 prompt tokens, 64 of them read from its cache. */
  static final ContextUsage CTX =
      new ContextUsage(BigInteger.valueOf(186), Map.of("cached_tokens", "64"), BigInteger.valueOf(64));

  /** A decode worker on vLLM with cache reporting: the transferred KV counted as a cache read. */
  static final String STREAM =
      Wire.messageStream(Wire.messagesUsage(186, 0, null, null), Wire.messagesUsage(0, 3, 0L, 186L), "Par", "is", ".");
  static final String EXPECTED =
      Wire.messageStream(
          "{\"input_tokens\":122,\"output_tokens\":0,\"cache_read_input_tokens\":64,\"cache_creation_input_tokens\":0}",
          Wire.messagesUsage(122, 3, 0L, 64L),
          "Par", "is", ".");

  static GenerationSseRewriter rewriter() {
    return GenerationSseRewriterTest.rewriter(ApiShapes.MESSAGES);
  }

  @Test
  void everyTwoSplitPointsGiveTheSameBytes() {
    GenerationSseRewriterTest.assertEveryTwoSplits(STREAM, EXPECTED, 5, CTX, ApiShapes.MESSAGES);
  }

  @Test
  void randomMultiSplitsAndCrlf() {
    GenerationSseRewriterTest.assertRandomSplitsWithCrlf(STREAM, EXPECTED, CTX, ApiShapes.MESSAGES);
  }

  @Test
  void theReportCarriesTheLastUsageEventsFigures() {
    GenerationSseRewriter r = rewriter();
    r.resolveContext(CTX, null);
    r.accept(STREAM.getBytes(StandardCharsets.UTF_8));
    r.finish();
    ExchangeReport report = r.report();
    assertThat(report.corrected()).isTrue();
    assertThat(report.model()).isEqualTo(Wire.MODEL);
    assertThat(report.figures())
        .isEqualTo(new UsageFigures(big(186), big(64), big(3), big(189), big(186)));
  }

  /**
   * Concurrent flows: the context usage is not known yet. {@code message_start} carries usage, so
   * from its usage key on everything is held; when the context usage lands, it all goes out rewritten.
   */
  @Test
  void withoutContextEverythingFromMessageStartOnIsHeld() {
    GenerationSseRewriter r = rewriter();
    int cut = STREAM.indexOf("\"model\"");
    // The start of message_start, cut by a chunk boundary before its usage key, leaves with its chunk:
    // a rewrite never changes it.
    r.accept(STREAM.substring(0, cut).getBytes(StandardCharsets.UTF_8));
    assertThat(new String(r.takeReady(), StandardCharsets.UTF_8)).isEqualTo(STREAM.substring(0, cut));
    r.accept(STREAM.substring(cut).getBytes(StandardCharsets.UTF_8));
    // Up to the usage key the event leaves now; from the key on everything waits.
    int key = STREAM.indexOf("\"usage\"");
    assertThat(new String(r.takeReady(), StandardCharsets.UTF_8)).isEqualTo(STREAM.substring(cut, key));
    assertThat(r.wantsContext()).isTrue();
    r.finish();
    assertThat(r.waiting()).isTrue();
    r.resolveContext(CTX, null);
    assertThat(new String(r.takeReady(), StandardCharsets.UTF_8)).isEqualTo(EXPECTED.substring(key));
    assertThat(r.report().outcome()).isEqualTo(Outcome.REWRITTEN);
  }

  @Test
  void onTheDeadlineTheWorkersUsageGoesOutUnchanged() {
    GenerationSseRewriter r = rewriter();
    r.accept(STREAM.getBytes(StandardCharsets.UTF_8));
    String out = new String(r.takeReady(), StandardCharsets.UTF_8);
    r.finish();
    r.resolveContext(null, null);
    assertThat(out + new String(r.takeReady(), StandardCharsets.UTF_8)).isEqualTo(STREAM);
    ExchangeReport report = r.report();
    assertThat(report.outcome()).isEqualTo(Outcome.CONTEXT_TIMEOUT);
    // The worker's own figures: input 0 + cache read 186 is its whole prompt.
    assertThat(report.figures()).isEqualTo(new UsageFigures(big(186), big(186), big(3), big(189), big(186)));
  }

  @Test
  void aContentOnlyStreamIsForwardedAsItCame() {
    String noUsage = STREAM.replace(",\"usage\":" + Wire.messagesUsage(0, 3, 0L, 186L), "")
        .replace(",\"usage\":" + Wire.messagesUsage(186, 0, null, null), "");
    assertThat(noUsage).doesNotContain("usage");
    GenerationSseRewriter r = rewriter();
    r.resolveContext(CTX, null);
    r.accept(noUsage.getBytes(StandardCharsets.UTF_8));
    r.finish();
    assertThat(new String(r.takeReady(), StandardCharsets.UTF_8)).isEqualTo(noUsage);
    assertThat(r.report().outcome()).isEqualTo(Outcome.NO_USAGE);
  }

  // ------------------------------------------------------------------------------------------
  // The context leg on /v1/messages

  static ContextObservation observe(ContextObserver o, String body, int chunk) {
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    ByteArrayOutputStream forwarded = new ByteArrayOutputStream();
    for (int at = 0; at < b.length; at += chunk) {
      o.accept(java.util.Arrays.copyOfRange(b, at, Math.min(b.length, at + chunk)));
      forwarded.writeBytes(o.takeReady());
    }
    o.finish();
    forwarded.writeBytes(o.takeReady());
    assertThat(forwarded.toString(StandardCharsets.UTF_8)).isEqualTo(body);
    return o.observation();
  }

  @Test
  void contextStreamTheLastUsageStatingAPromptWins() {
    var json = UsageDocument.newFactory(1 << 20);
    // vLLM: message_start before the cache counts are known, message_delta with them.
    String stream = Wire.messageStream(Wire.messagesUsage(186, 0, null, null), Wire.messagesUsage(122, 1, 0L, 64L), "Paris");
    for (int chunk = 1; chunk <= stream.length(); chunk += 13) {
      ContextObservation seen = observe(new ContextSseObserver(json, 1 << 16), stream, chunk);
      assertThat(seen.outcome()).isEqualTo(Outcome.STORED);
      assertThat(seen.usage()).isEqualTo(new ContextUsage(big(186), Map.of("cached_tokens", "64"), big(64), big(0)));
      assertThat(seen.model()).isEqualTo(Wire.MODEL);
    }
    // The Anthropic API's older message_delta states the output count only: message_start's stands.
    String outputOnly =
        Wire.messageStream(Wire.messagesUsage(10, 1, 100L, 50L), "{\"output_tokens\":1}", "Paris");
    ContextObservation seen = observe(new ContextSseObserver(json, 1 << 16), outputOnly, 7);
    assertThat(seen.outcome()).isEqualTo(Outcome.STORED);
    assertThat(seen.usage()).isEqualTo(new ContextUsage(big(160), Map.of("cached_tokens", "50"), big(50), big(100)));
  }

  @Test
  void contextJsonOnMessages() {
    var json = UsageDocument.newFactory(1 << 20);
    String body = Wire.prefillMessage(Wire.messagesUsage(122, 1, 0L, 64L));
    ContextObservation seen = observe(new ContextJsonObserver(json, 1 << 20), body, 9);
    assertThat(seen.outcome()).isEqualTo(Outcome.STORED);
    assertThat(seen.usage()).isEqualTo(new ContextUsage(big(186), Map.of("cached_tokens", "64"), big(64), big(0)));
    // A JSON body's usage without a prompt count stays unusable (it is the whole answer).
    ContextObservation promptless =
        observe(new ContextJsonObserver(json, 1 << 20), Wire.prefillMessage("{\"output_tokens\":1}"), 9);
    assertThat(promptless.outcome()).isEqualTo(Outcome.PARSE_ERROR);
  }

  private static BigInteger big(long n) {
    return BigInteger.valueOf(n);
  }
}
