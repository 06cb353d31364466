package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.OpenAiClientView;
import io.disaggusage.extproc.testkit.Wire;
import static io.disaggusage.extproc.testkit.EngineRequests.PATH;
import static io.disaggusage.extproc.scenario.EngineScenarioTest.genExchange;
import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.testkit.OpenAiClientView.ClientUsage;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * SGLang PD (engines.md §4): both legs carry the same body, so the phase comes from the Envoy cluster;
 * legs are joined on {@code bootstrap_host} + {@code bootstrap_room}; the router dispatches both at
 * once, so the order is concurrent by default. {@code n>1} and batches carry arrays of rooms, joined
 * on a digest of the whole array.
 */
class SglangScenarioTest extends ScenarioFixture {

  static String body(String rooms, String hosts, int n) {
    return "{\"model\":\"" + Wire.MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"n\":" + n
        + ",\"stream\":true,\"stream_options\":{\"include_usage\":true},\"bootstrap_host\":" + hosts
        + ",\"bootstrap_port\":8998,\"bootstrap_room\":" + rooms + "}";
  }

  /** An n=2 stream: content for both choices, then the usage of the whole request. */
  static String twoChoiceStream(String usage) {
    return Wire.chunk("Hel") + Wire.chunk("Bon").replace("\"index\":0", "\"index\":1") + Wire.usageChunk(usage) + Wire.DONE;
  }

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

  static Stream<Arguments> batches() {
    return EngineScenarioTest.chunkings().flatMap(c -> Stream.of(
        Arguments.of(c.get()[0] + " rooms[2] host", c.get()[1], "[9223372036854775806,4611686018427387904]", "\"10.1.0.5\""),
        Arguments.of(c.get()[0] + " rooms[2] hosts[2]", c.get()[1], "[9223372036854775806,4611686018427387904]",
            "[\"10.1.0.5\",\"10.1.0.6\"]")));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("batches")
  void nGreaterThanOneJoinsOnTheWholeRoomArray(String name, Chunking chunking, String rooms, String hosts) throws Exception {
    String body = body(rooms, hosts, 2);
    String gen = twoChoiceStream(Wire.usage(300, 40, 300L));
    ExchangeResult[] r =
        Flows.generationFirst(
            service.envoy,
            contextLeg(body, twoChoiceStream(Wire.usage(300, 2, 256L))),
            generationLeg(body, gen, chunking));
    assertClean(r[1]);
    assertThat(r[1].clientResponse().bodyUtf8()).isEqualTo(gen.replace("{\"cached_tokens\":300}", "{\"cached_tokens\":256}"));
    assertThat(OpenAiClientView.chatStreamUsages(r[1].clientResponse().bodyUtf8()))
        .containsExactly(new ClientUsage(300, 256L, 40, 340));
    assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("rewritten");
  }

  @Test
  void anotherBatchIsNotJoinedToThisOne() throws Exception {
    String gen = twoChoiceStream(Wire.usage(300, 40, 300L));
    // The context leg of another batch (one room differs) finishes first and is stored ...
    Flows.run(service.envoy, contextLeg(body("[1,2]", "\"10.1.0.5\"", 2), twoChoiceStream(Wire.usage(300, 2, 256L))));
    // ... this batch's generation leg (rooms [1,3]) must not take it: it waits, then passes unchanged.
    ExchangeResult r = Flows.run(service.envoy, generationLeg(body("[1,3]", "\"10.1.0.5\"", 2), gen, Chunking.whole()));
    assertClean(r);
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo(gen);
    assertThat(r.accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("context_timeout");
  }

  /** SGLang's default ordering is concurrent, yet a prefill that happens to finish first works too. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("io.disaggusage.extproc.scenario.EngineScenarioTest#chunkings")
  void prefillFinishingFirstNeedsNoWait(String name, Chunking chunking) throws Exception {
    String body = body("9223372036854775806", "\"10.1.0.5\"", 1);
    String gen = Wire.chatStream(Wire.usage(300, 20, 300L), "H", "ello");
    ExchangeResult[] r =
        Flows.contextFirst(
            service.envoy,
            contextLeg(body, Wire.chatStream(Wire.usage(300, 1, 128L), "H")),
            generationLeg(body, gen, chunking));
    assertClean(r[1]);
    assertThat(r[1].clientResponse().bodyUtf8()).isEqualTo(gen.replace("{\"cached_tokens\":300}", "{\"cached_tokens\":128}"));
  }

  /** Without the cluster lists the two identical bodies say nothing: both legs pass untouched. */
  @Test
  void withoutClusterNamesNothingIsTouched() throws Exception {
    String body = body("7", "\"10.1.0.5\"", 1);
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
