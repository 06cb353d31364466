package io.disaggusage.extproc.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.scenario.ExchangeLedger.Entry;
import io.disaggusage.extproc.testkit.OutsideUsage;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.extension.AfterTestExecutionCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * What every exchange of the specification must satisfy, whatever the test asked of it: checked after
 * each test (each cell of a parameterized one) on every exchange the drivers recorded in {@link
 * ExchangeLedger}, as Caffeine's validation listener checks its caches. Registered on the
 * specification's classes through {@link ExchangeSpecification}, so a new test method gets it too.
 *
 * <ul>
 *   <li>the bytes outside {@code usage} are the worker's ({@link OutsideUsage}), for JSON and SSE;
 *   <li>every usage object the service rewrote has non-negative integer counts, total = prompt +
 *       completion and cached ≤ prompt ({@link UsageConsistency});
 *   <li>the figures in the metadata obey the same rules;
 *   <li>accounting is present: figures come with their outcome, and the service's metrics counted at
 *       least as many exchanges as were run against it.
 * </ul>
 *
 * A test that failed is not checked again: its own failure is the one to read.
 */
final class ExchangeInvariants implements BeforeEachCallback, AfterTestExecutionCallback {
  /** How long the accounting may lag the client's last byte: a stream's end is counted on the service's thread. */
  private static final Duration ACCOUNTING_SETTLES = Duration.ofSeconds(5);

  @Override
  public void beforeEach(ExtensionContext context) {
    ExchangeLedger.open();
  }

  @Override
  public void afterTestExecution(ExtensionContext context) throws Exception {
    ExchangeLedger.Recorded recorded = ExchangeLedger.close();
    if (context.getExecutionException().isPresent()) {
      return;
    }
    SoftAssertions soft = new SoftAssertions();
    for (Entry e : recorded.entries()) {
      soft.assertThat(e.metrics()).as("%s: run on a driver whose service the ExchangeLedger was not told of", e.name()).isNotNull();
      check(soft, e);
    }
    soft.assertAll();
    for (Map.Entry<Metrics, Long> m : recorded.perMetrics().entrySet()) {
      assertCounted(m.getKey(), m.getValue());
    }
  }

  static void check(SoftAssertions soft, Entry e) {
    String metadataPrompt = e.metadata().apply("prompt_tokens");
    if (metadataPrompt != null) {
      soft.assertThat(e.metadata().apply("outcome")).as("%s: figures without an outcome", e.name()).isNotNull();
      assertFigures(soft, e);
    }
    if (!e.complete() || Arrays.equals(e.workerBody(), e.clientBody()) || !isText(e.contentType())) {
      return; // nothing rewritten, or not whole, or a binary format (msgpack) OutsideUsage cannot read
    }
    String worker = new String(e.workerBody(), StandardCharsets.UTF_8);
    String client = new String(e.clientBody(), StandardCharsets.UTF_8);
    if (e.requestRewritten()) {
      soft.assertThat(unaskedEventsRemoved(OutsideUsage.of(worker), OutsideUsage.of(client)))
          .as("%s: bytes outside usage, less the usage events the client did not ask for", e.name()).isTrue();
    } else {
      soft.assertThat(OutsideUsage.of(client)).as("%s: bytes outside usage", e.name()).isEqualTo(OutsideUsage.of(worker));
    }
    UsageConsistency.problems(client).forEach(p -> soft.fail("%s: %s", e.name(), p));
  }

  /**
   * Whether {@code client} is {@code worker} with only events carrying a usage object taken out: what an
   * injected {@code include_usage} makes of a stream whose client did not ask for usage.
   */
  static boolean unaskedEventsRemoved(String worker, String client) {
    List<String> c = List.of(client.split("(?<=\\n\\n)"));
    int at = 0;
    for (String event : worker.split("(?<=\\n\\n)")) {
      if (at < c.size() && c.get(at).equals(event)) {
        at++;
      } else if (!event.contains("\"usage\":{")) {
        return false;
      }
    }
    return at == c.size();
  }

  private static boolean isText(String contentType) {
    return contentType.startsWith("application/json") || contentType.startsWith("text/event-stream");
  }

  /** The corrected figures of the metadata: non-negative integers, total = prompt + completion, cached ≤ prompt. */
  private static void assertFigures(SoftAssertions soft, Entry e) {
    Map<String, Long> f = new java.util.HashMap<>();
    for (String key : List.of("prompt_tokens", "cached_tokens", "completion_tokens", "total_tokens")) {
      String v = e.metadata().apply(key);
      soft.assertThat(v).as("%s: metadata %s", e.name(), key).isNotNull().matches("[0-9]+");
      if (v != null && v.matches("[0-9]+")) {
        f.put(key, Long.parseLong(v));
      }
    }
    if (f.size() == 4) {
      soft.assertThat(f.get("total_tokens")).as("%s: metadata total = prompt + completion", e.name())
          .isEqualTo(f.get("prompt_tokens") + f.get("completion_tokens"));
      soft.assertThat(f.get("cached_tokens")).as("%s: metadata cached ≤ prompt", e.name()).isLessThanOrEqualTo(f.get("prompt_tokens"));
    }
  }

  /**
   * Every exchange run against {@code metrics} is counted under some phase and outcome: at least {@code
   * recorded} (a test may also run exchanges no driver records, a handle it never awaited).
   */
  private static void assertCounted(Metrics metrics, long recorded) throws InterruptedException {
    long deadline = System.nanoTime() + ACCOUNTING_SETTLES.toNanos();
    while (counted(metrics) < recorded && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertThat(counted(metrics)).as("exchanges counted in the metrics").isGreaterThanOrEqualTo(recorded);
  }

  private static long counted(Metrics metrics) {
    long n = 0;
    for (Phase p : Phase.values()) {
      for (Outcome o : Outcome.values()) {
        n += metrics.exchangeCount(p, o);
      }
    }
    return n;
  }
}
