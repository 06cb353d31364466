package io.disaggusage.extproc.scenario;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.scenario.ExchangeLedger.Entry;
import io.disaggusage.extproc.testkit.Wire;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.Test;

/** The checker itself: it sees the exchanges the drivers ran, and it fails on each broken invariant. */
class ExchangeInvariantsTest {
  private static final String WORKER = Wire.chatCompletion("g", Wire.usage(50, 4, 50L));
  private static final Map<String, String> FIGURES =
      Map.of("outcome", "rewritten", "prompt_tokens", "50", "cached_tokens", "10", "completion_tokens", "4", "total_tokens", "54");

  private static Entry entry(String client, Map<String, String> metadata) {
    return new Entry("test", "application/json", utf8(WORKER), utf8(client), true, false, metadata::get, null);
  }

  private static void check(Entry e) {
    SoftAssertions soft = new SoftAssertions();
    ExchangeInvariants.check(soft, e);
    soft.assertAll();
  }

  @Test
  void theDriversRecordEveryExchangeWithTheMetricsOfItsService() throws Exception {
    ExchangeLedger.open();
    List<Entry> recorded;
    try (ServiceUnderTest s = new ServiceUnderTest(ServiceUnderTest.testConfig())) {
      ExchangeResult[] r = Flows.contextFirst(s.envoy, Flows.ctx("inv", Wire.chatCompletion("c", Wire.usage(50, 1, 10L))),
          Flows.gen("inv", "application/json", WORKER));
      ExchangeLedger.Recorded closed = ExchangeLedger.close();
      recorded = closed.entries();
      assertThat(closed.perMetrics()).containsExactly(Map.entry(s.metrics, 2L));
      assertThat(recorded).hasSize(2);
      assertThat(recorded).allSatisfy(e -> assertThat(e.metrics()).isSameAs(s.metrics));
      assertThat(recorded.get(1).clientBody()).isEqualTo(r[1].clientResponse().body());
      assertThat(recorded.get(1).metadata().apply("cached_tokens")).isEqualTo("10");
    }
    recorded.forEach(ExchangeInvariantsTest::check);
    assertThat(ExchangeLedger.close().entries()).as("nothing kept outside a test of the specification").isEmpty();
  }

  @Test
  void aCorrectedBodyPasses() {
    check(entry(WORKER.replace("{\"cached_tokens\":50}", "{\"cached_tokens\":10}"), FIGURES));
  }

  @Test
  void bytesChangedOutsideUsageFail() {
    assertThatThrownBy(() -> check(entry(WORKER.replace("Paris", "Lyon!"), FIGURES))).hasMessageContaining("bytes outside usage");
  }

  @Test
  void aRewrittenUsageThatDoesNotAddUpFails() {
    assertThatThrownBy(() -> check(entry(WORKER.replace("\"total_tokens\":54", "\"total_tokens\":55"), FIGURES)))
        .hasMessageContaining("total_tokens");
    assertThatThrownBy(() -> check(entry(WORKER.replace("{\"cached_tokens\":50}", "{\"cached_tokens\":51}"), FIGURES)))
        .hasMessageContaining("cached_tokens 51 > prompt_tokens");
    assertThatThrownBy(() -> check(entry(WORKER.replace("{\"cached_tokens\":50}", "{\"cached_tokens\":-1}"), FIGURES)))
        .hasMessageContaining("not a non-negative integer");
  }

  @Test
  void figuresThatDoNotAddUpOrComeWithoutAnOutcomeFail() {
    Map<String, String> badTotal = new java.util.HashMap<>(FIGURES);
    badTotal.put("total_tokens", "53");
    assertThatThrownBy(() -> check(entry(WORKER, badTotal))).hasMessageContaining("metadata total = prompt + completion");
    Map<String, String> noOutcome = new java.util.HashMap<>(FIGURES);
    noOutcome.remove("outcome");
    assertThatThrownBy(() -> check(entry(WORKER, noOutcome))).hasMessageContaining("figures without an outcome");
  }

  @Test
  void onlyUsageEventsTheClientDidNotAskForMayBeMissing() {
    String content = Wire.chunk("Par") + Wire.chunk("is");
    String worker = content + Wire.usageChunk(Wire.usage(40, 3, 40L)) + Wire.DONE;
    assertThat(ExchangeInvariants.unaskedEventsRemoved(worker, content + Wire.DONE)).isTrue();
    assertThat(ExchangeInvariants.unaskedEventsRemoved(worker, Wire.chunk("Par") + Wire.DONE)).isFalse();
  }

  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
