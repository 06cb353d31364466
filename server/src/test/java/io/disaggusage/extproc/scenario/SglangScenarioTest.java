package io.disaggusage.extproc.scenario;

import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static io.disaggusage.extproc.scenario.Flows.genExchange;
import static io.disaggusage.extproc.testkit.EngineRequests.PATH;
import static io.disaggusage.extproc.testkit.ScenarioVectors.sglangRequest;
import static io.disaggusage.extproc.testkit.ScenarioVectors.sglangTwoChoiceStream;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.testkit.Wire;
import org.junit.jupiter.api.Test;

/**
 * SGLang PD (engines.md §4): both legs carry the same body, so the phase comes from the Envoy cluster;
 * legs are joined on {@code bootstrap_host} + {@code bootstrap_room}. What must not join: another batch,
 * or legs without a cluster list. (The joins that work, n>1 and batches included, are vectors of
 * {@link ExchangeSpecificationTest}.)
 */
class SglangScenarioTest extends ScenarioFixture {

  static Exchange.Builder contextLeg(String body, String stream) {
    return Exchange.post(PATH, body)
        .requestAttribute("xds.cluster_name", ServiceUnderTest.CONTEXT_CLUSTER)
        .responseHeader("content-type", "text/event-stream")
        .responseBody(stream)
        .responseChunking(Chunking.fixed(50));
  }

  static Exchange.Builder generationLeg(String body, String stream, Chunking chunking) {
    return genExchange(body, "text/event-stream", stream, chunking)
        .requestAttribute("xds.cluster_name", ServiceUnderTest.GENERATION_CLUSTER);
  }

  @Test
  void anotherBatchIsNotJoinedToThisOne() throws Exception {
    String gen = sglangTwoChoiceStream(Wire.usage(300, 40, 300L));
    // The context leg of another batch (one room differs) finishes first and is stored ...
    Flows.run(service.envoy, contextLeg(sglangRequest("[1,2]", "\"10.1.0.5\"", 2), sglangTwoChoiceStream(Wire.usage(300, 2, 256L))));
    // ... this batch's generation leg (rooms [1,3]) must not take it: it waits, then passes unchanged.
    ExchangeResult r = Flows.run(service.envoy, generationLeg(sglangRequest("[1,3]", "\"10.1.0.5\"", 2), gen, Chunking.whole()));
    assertClean(r);
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo(gen);
    assertThat(r.accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("context_timeout");
  }

  /** Without the cluster lists the two identical bodies say nothing: both legs pass untouched. */
  @Test
  void withoutClusterNamesNothingIsTouched() throws Exception {
    String body = sglangRequest("7", "\"10.1.0.5\"", 1);
    String gen = Wire.chatStream(Wire.usage(300, 20, 300L), "H");
    ExchangeResult r =
        Flows.run(service.envoy, genExchange(body, "text/event-stream", gen, Chunking.fixed(40))
            .requestAttribute("xds.cluster_name", "some-other-pool"));
    assertClean(r);
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo(gen);
    // Not disaggregated: the service stops at the request and sets no metadata at all.
    assertThat(r.accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("-");
    assertThat(r.messagesSent()).noneMatch(m -> m.hasResponseBody());
  }
}
