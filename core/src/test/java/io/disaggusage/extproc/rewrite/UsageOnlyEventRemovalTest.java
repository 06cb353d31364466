package io.disaggusage.extproc.rewrite;

import static io.disaggusage.extproc.rewrite.UsageOnlyEventCasesTest.DONE;
import static io.disaggusage.extproc.rewrite.UsageOnlyEventCasesTest.JSON;
import static io.disaggusage.extproc.rewrite.UsageOnlyEventCasesTest.USAGE_EVENT;
import static io.disaggusage.extproc.rewrite.UsageOnlyEventCasesTest.content;
import static io.disaggusage.extproc.testing.Text.utf8;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.inject.InjectedUsageEvents;
import io.disaggusage.extproc.inject.UsageRemoval;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.usage.ApiShapes;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.JsonUsageRewriter;
import java.io.ByteArrayOutputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The SSE processors taking the injected usage event out: the report keeps the (corrected) numbers,
 * the client bytes lose exactly the usage event, content is released as early as without the removal,
 * and the result is reported once.
 */
class UsageOnlyEventRemovalTest {
  static final ContextUsage CTX =
      new ContextUsage(BigInteger.valueOf(1200), Map.of("cached_tokens", "7"), BigInteger.valueOf(7));
  static final String BODY = content("Par") + content("is");
  static final String STREAM = BODY + USAGE_EVENT + DONE;

  final List<UsageRemoval> results = new ArrayList<>();

  GenerationSseRewriter generation() {
    return new GenerationSseRewriter(
        new JsonUsageRewriter(JSON, 65536), JSON, ApiShapes.CHAT, 1 << 16, 1 << 20, injected());
  }

  InjectedUsageEvents injected() {
    return new InjectedUsageEvents(JSON, results::add);
  }

  @Test
  void theRewrittenUsageIsReportedAndTheEventRemovedForEveryChunking() {
    for (Chunking chunking : List.of(Chunking.whole(), Chunking.bytewise(), Chunking.fixed(13), Chunking.random(7, 50))) {
      results.clear();
      GenerationSseRewriter p = generation();
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
    GenerationSseRewriter p = generation();
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
    // Whole content events leave as the very same array (no copy, no body mutation).
    GenerationSseRewriter p = generation();
    p.resolveContext(CTX, null);
    byte[] whole = utf8(content("a") + content("b"));
    p.accept(whole);
    assertThat(p.takeReady()).isSameAs(whole);
    // A content event cut after its "choices":[{ goes out up to the cut, as without the removal.
    String next = content("c");
    int cut = next.indexOf("[{") + 2;
    p.accept(utf8(next.substring(0, cut)));
    assertThat(new String(p.takeReady(), StandardCharsets.UTF_8)).isEqualTo(next.substring(0, cut));
    // Nor does the context observer keep content back.
    ContextSseObserver observer = new ContextSseObserver(JSON, 1 << 16, injected());
    observer.accept(whole);
    assertThat(observer.takeReady()).isEqualTo(whole);
    observer.accept(utf8(next.substring(0, cut)));
    assertThat(new String(observer.takeReady(), StandardCharsets.UTF_8)).isEqualTo(next.substring(0, cut));
    // A usage-only event's start waits for its end, and then goes nowhere.
    int usageCut = USAGE_EVENT.indexOf("[]") + 1;
    observer.accept(utf8(next.substring(cut) + USAGE_EVENT.substring(0, usageCut)));
    assertThat(new String(observer.takeReady(), StandardCharsets.UTF_8)).isEqualTo(next.substring(cut));
    observer.accept(utf8(USAGE_EVENT.substring(usageCut)));
    assertThat(observer.takeReady()).isEmpty();
  }

  @Test
  void aUsageEventThatWouldLeaveEarlyWithoutTheRemovalWaitsForItsEnd() {
    // Without the removal the start of an event goes out up to its "usage" key; with it, not a byte
    // of a usage-only event does.
    GenerationSseRewriter p = generation();
    p.resolveContext(CTX, null);
    int cut = USAGE_EVENT.indexOf("\"usage\"") + 3;
    p.accept(utf8(BODY + USAGE_EVENT.substring(0, cut)));
    assertThat(new String(p.takeReady(), StandardCharsets.UTF_8)).isEqualTo(BODY);
    p.accept(utf8(USAGE_EVENT.substring(cut) + DONE));
    assertThat(new String(p.takeReady(), StandardCharsets.UTF_8)).isEqualTo(DONE);
    assertThat(p.usageReleased()).isZero();
    p.finish();
    assertThat(p.takeReady()).isEmpty();
    assertThat(results).containsExactly(UsageRemoval.REMOVED);
  }

  @Test
  void aStreamWithoutUsageReportsAbsentAndAnAbandonedOneLeaked() {
    GenerationSseRewriter p = generation();
    p.resolveContext(CTX, null);
    p.accept(utf8(BODY + DONE));
    p.finish();
    assertThat(new String(p.takeReady(), StandardCharsets.UTF_8)).isEqualTo(BODY + DONE);
    p.takeReady();
    assertThat(results).containsExactly(UsageRemoval.ABSENT);

    results.clear();
    GenerationSseRewriter q = generation();
    q.resolveContext(CTX, null);
    String partialUsage = USAGE_EVENT.substring(0, 40);
    q.accept(utf8(BODY + partialUsage));
    assertThat(new String(q.takeReady(), StandardCharsets.UTF_8)).isEqualTo(BODY);
    assertThat(new String(q.abandon(), StandardCharsets.UTF_8)).isEqualTo(partialUsage);
    assertThat(results).containsExactly(UsageRemoval.LEAKED);
  }

  @Test
  void theContextObserverStillReadsTheUsageItNoLongerForwards() {
    var observer = new ContextSseObserver(JSON, 1 << 16, injected());
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
