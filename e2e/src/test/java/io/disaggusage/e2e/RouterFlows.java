package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.AccessLogLine;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.disaggusage.e2e.TrueUsage.Usage;
import io.disaggusage.extproc.testkit.Wire;
import io.disaggusage.extproc.emulator.workers.RecordedRequest;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * One prompt sent through a router several times, each client's usage checked against the prefill
 * worker's truth as it goes, and afterwards every exchange's access-log metadata and the service's count.
 */
final class RouterFlows {
  private RouterFlows() {}

  /** curl, one request per entry of {@code streams} (SSE where true); returns each exchange's truth. */
  static List<Usage> curl(RouterDeployment deployment, String prompt, int maxTokens, int n, boolean... streams) {
    TrueUsage truth = new TrueUsage();
    List<Usage> expected = new ArrayList<>();
    for (boolean stream : streams) {
      Usage want = truth.next(prompt, maxTokens, n);
      expected.add(want);
      String body;
      try {
        body = RouterClients.curl(deployment, RouterClients.chat(Wire.MODEL, prompt, maxTokens, n, stream), stream);
      } catch (AssertionError e) {
        throw new AssertionError("the router failed; the decode worker received "
            + deployment.decode.log().completions().stream().map(RecordedRequest::bodyUtf8).toList(), e);
      }
      assertThat(RouterClients.read(RouterClients.usage(body, stream))).as("stream=" + stream).isEqualTo(want);
    }
    return expected;
  }

  /** The OpenAI Python SDK's chat call {@code times} times; returns each exchange's truth. */
  static List<Usage> sdk(RouterDeployment deployment, String prompt, boolean stream, int times) {
    TrueUsage truth = new TrueUsage();
    List<Usage> expected = new ArrayList<>();
    for (int i = 0; i < times; i++) {
      Usage want = truth.next(prompt, RouterClients.SDK_MAX_TOKENS, 1);
      expected.add(want);
      JsonNode usage = RouterClients.sdkChatUsage(deployment, prompt, stream);
      assertThat(RouterClients.read(usage)).as(usage.toString()).isEqualTo(want);
    }
    return expected;
  }

  /**
   * After a repeated prompt: the repeat hit the prefill's cache, every exchange is accounted
   * ({@link #assertEveryExchange}), the router's wire is as {@code wire} expects, and its start-up calls
   * ({@code probes}, on both workers) passed untouched.
   */
  static void assertRepeatedPrompt(
      RouterDeployment deployment, List<Usage> expected, java.util.function.Consumer<RouterDeployment> wire, List<String> probes) {
    assertThat(expected.get(1).cached()).as("the repeated prompt hits the prefill's cache").isPositive();
    assertEveryExchange(deployment, expected);
    wire.accept(deployment);
    DiscoveryPassThrough.assertUntouched(deployment, probes, probes, expected.size());
  }

  /**
   * {@link ConcurrentFlows} through the router, every client sending {@code headers}: each client reads its
   * own truth, the access log holds each once, and the service counted every generation rewritten.
   */
  static ConcurrentFlows.Sent concurrent(RouterDeployment deployment, Map<String, String> headers) throws Exception {
    TrueUsage truth = new TrueUsage();
    ConcurrentFlows.Sent sent = ConcurrentFlows.run(flow -> truth, flow -> flow % 2 == 1,
        (flow, body, stream) -> RouterClients.read(RouterClients.usage(RouterClients.curl(deployment, body, stream, headers), stream)),
        () -> "the service's generation outcomes " + ServiceMetrics.exchanges(deployment.service, "generation"));
    GenerationLedger ledger = new GenerationLedger(deployment);
    ledger.awaitCompletions(sent.expected().size());
    ConcurrentFlows.assertEachTruthOnce(ledger.completions(), deployment.service, sent.expected());
    return sent;
  }

  /** The access-log metadata of every generation exchange, in order, and the service's count of them. */
  static void assertEveryExchange(RouterDeployment deployment, List<Usage> expected) {
    GenerationLedger ledger = new GenerationLedger(deployment);
    ledger.awaitCompletions(expected.size());
    List<AccessLogLine> lines = ledger.completions();
    assertThat(lines).hasSize(expected.size());
    for (int i = 0; i < expected.size(); i++) {
      GenerationLedger.assertMetadata(lines.get(i), expected.get(i));
    }
    ServiceMetrics.assertAllCorrected(deployment.service, expected.size());
    assertThat(deployment.decode.log().completions()).hasSize(expected.size());
    assertThat(deployment.prefill.log().completions()).hasSize(expected.size());
  }
}
