package io.disaggusage.extproc.inject;

import static io.disaggusage.extproc.inject.UsageEventRemoverTest.DONE;
import static io.disaggusage.extproc.inject.UsageEventRemoverTest.JSON;
import static io.disaggusage.extproc.inject.UsageEventRemoverTest.USAGE_EVENT;
import static io.disaggusage.extproc.inject.UsageEventRemoverTest.content;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.exchange.ContextSseObserver;
import io.disaggusage.extproc.exchange.GenerationSseRewriter;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.simulation.envoy.Chunking;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.JsonUsageRewriter;
import io.disaggusage.extproc.usage.ApiShapes;
import java.io.ByteArrayOutputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The usual processors with the injected usage event taken out: the report keeps the (corrected)
 * numbers, the client bytes lose exactly the usage event, content is released as early as without the
 * removal, and the result is reported once.
 */
class UsageRemovingProcessorTest {
  static final ContextUsage CTX =
      new ContextUsage(BigInteger.valueOf(1200), Map.of("cached_tokens", "7"), BigInteger.valueOf(7));
  static final String BODY = content("Par") + content("is");
  static final String STREAM = BODY + USAGE_EVENT + DONE;

  final List<UsageRemoval> results = new ArrayList<>();

  UsageRemovingProcessor generation() {
    var rewriter = new GenerationSseRewriter(new JsonUsageRewriter(JSON, 65536), JSON, ApiShapes.CHAT, 1 << 16, 1 << 20);
    return new UsageRemovingProcessor(rewriter, new UsageEventRemover(JSON, 1 << 16), results::add);
  }

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void theRewrittenUsageIsReportedAndTheEventRemovedForEveryChunking() {
    for (Chunking chunking : List.of(Chunking.whole(), Chunking.bytewise(), Chunking.fixed(13), Chunking.random(7, 50))) {
      results.clear();
      UsageRemovingProcessor p = generation();
      p.resolveContext(CTX, null);
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      for (byte[] chunk : chunking.split(utf8(STREAM))) {
        p.accept(chunk);
        out.writeBytes(p.takeReady());
      }
      p.finish();
      out.writeBytes(p.takeReady());
      assertThat(out.toString(StandardCharsets.UTF_8)).isEqualTo(BODY + DONE);
      assertThat(p.report().outcome()).isEqualTo(Outcome.REWRITTEN);
      assertThat(p.report().figures().cached()).isEqualTo(BigInteger.valueOf(7));
      assertThat(p.report().figures().reportedCached()).isEqualTo(BigInteger.valueOf(16));
      assertThat(results).containsExactly(UsageRemoval.REMOVED);
    }
  }

  @Test
  void whileTheUsageWaitsForContextContentFlowsAndTheEndWaitsWithIt() {
    UsageRemovingProcessor p = generation();
    p.accept(utf8(BODY + USAGE_EVENT));
    assertThat(new String(p.takeReady(), StandardCharsets.UTF_8)).isEqualTo(BODY);
    assertThat(p.wantsContext()).isTrue();
    p.accept(utf8(DONE));
    p.finish();
    assertThat(p.waiting()).isTrue();
    assertThat(p.takeReady()).isEmpty();
    assertThat(results).isEmpty();
    p.resolveContext(CTX, null);
    assertThat(new String(p.takeReady(), StandardCharsets.UTF_8)).isEqualTo(DONE);
    assertThat(p.report().figures().cached()).isEqualTo(BigInteger.valueOf(7));
    assertThat(results).containsExactly(UsageRemoval.REMOVED);
  }

  @Test
  void contentLeavesAsItCame() {
    // Whole content events pass the remover as the very same array (no copy, no body mutation).
    UsageEventRemover remover = new UsageEventRemover(JSON, 1 << 16);
    byte[] whole = utf8(content("a") + content("b"));
    assertThat(remover.filter(whole)).isSameAs(whole);
    // A content event cut after its "choices":[{ goes out up to the cut, as without the removal.
    UsageRemovingProcessor p = generation();
    p.resolveContext(CTX, null);
    String next = content("c");
    int cut = next.indexOf("[{") + 2;
    p.accept(utf8(next.substring(0, cut)));
    assertThat(new String(p.takeReady(), StandardCharsets.UTF_8)).isEqualTo(next.substring(0, cut));
  }

  @Test
  void aStreamWithoutUsageReportsAbsentAndAnAbandonedOneLeaked() {
    UsageRemovingProcessor p = generation();
    p.resolveContext(CTX, null);
    p.accept(utf8(BODY + DONE));
    p.finish();
    assertThat(new String(p.takeReady(), StandardCharsets.UTF_8)).isEqualTo(BODY + DONE);
    p.takeReady();
    assertThat(results).containsExactly(UsageRemoval.ABSENT);

    results.clear();
    UsageRemovingProcessor q = generation();
    q.resolveContext(CTX, null);
    String partialUsage = USAGE_EVENT.substring(0, 40);
    q.accept(utf8(BODY + partialUsage));
    assertThat(new String(q.takeReady(), StandardCharsets.UTF_8)).isEqualTo(BODY);
    assertThat(new String(q.abandon(), StandardCharsets.UTF_8)).isEqualTo(partialUsage);
    assertThat(results).containsExactly(UsageRemoval.LEAKED);
  }

  @Test
  void theContextObserverStillReadsTheUsageItNoLongerForwards() {
    var observer = new UsageRemovingContextObserver(
        new ContextSseObserver(JSON, 1 << 16), new UsageEventRemover(JSON, 1 << 16), results::add);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (byte[] chunk : Chunking.fixed(9).split(utf8(STREAM))) {
      observer.accept(chunk);
      out.writeBytes(observer.takeReady());
    }
    observer.finish();
    out.writeBytes(observer.takeReady());
    assertThat(out.toString(StandardCharsets.UTF_8)).isEqualTo(BODY + DONE);
    assertThat(observer.observation().usage().promptTokens()).isEqualTo(BigInteger.valueOf(1200));
    assertThat(observer.observation().outcome()).isEqualTo(Outcome.STORED);
    assertThat(results).containsExactly(UsageRemoval.REMOVED);
  }
}
