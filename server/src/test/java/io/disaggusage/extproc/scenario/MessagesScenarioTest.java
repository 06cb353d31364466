package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.AnthropicClientView;
import io.disaggusage.extproc.testkit.Wire;
import io.disaggusage.extproc.testkit.EngineRequests;
import static io.disaggusage.extproc.scenario.EngineScenarioTest.assertRewritten;
import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.rewrite.Outcome;
import io.disaggusage.extproc.rewrite.Phase;
import io.disaggusage.extproc.testkit.AnthropicClientView.MessagesUsage;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * vLLM's Anthropic Messages API ({@code POST /v1/messages}) in P/D disaggregation, through the fake
 * Envoy under many chunkings: the decode worker reports the transferred prompt KV as a cache read, the
 * client sees the prefill worker's split, and the official Anthropic SDK reads the result.
 */
class MessagesScenarioTest extends ScenarioFixture {
  static final String PATH = EngineRequests.MESSAGES_PATH;

  static String request(boolean prefill, boolean stream) {
    return EngineRequests.messagesRequest(prefill, stream);
  }

  /** The prefill leg on {@code path}, answering {@code body} as JSON or SSE. */
  static Exchange.Builder prefill(String id, String path, String contentType, String body) {
    return Exchange.post(path, request(true, contentType.equals("text/event-stream")))
        .requestHeader("x-request-id", id)
        .responseHeader("content-type", contentType)
        .responseBody(body)
        .responseChunking(Chunking.fixed(33));
  }

  static Exchange.Builder decode(String id, String contentType, String body, Chunking chunking) {
    return EngineScenarioTest.genExchange(request(false, contentType.equals("text/event-stream")), contentType, body, chunking)
        .path(PATH)
        .requestHeader("x-request-id", id);
  }

  /** vLLM reporting cache counts: the decode worker's 186-token prompt is all a cache read. */
  static final String GEN_USAGE = Wire.messagesUsage(0, 8, 0L, 186L);
  static final String FIXED_USAGE = Wire.messagesUsage(122, 8, 0L, 64L);

  @ParameterizedTest(name = "{0}")
  @MethodSource("io.disaggusage.extproc.scenario.EngineScenarioTest#chunkings")
  void jsonWithTheContextLegOnChatCompletions(String name, Chunking chunking) throws Exception {
    String body = Wire.message(GEN_USAGE);
    ExchangeResult[] r =
        Flows.contextFirst(
            service.envoy,
            prefill("m-1", "/v1/chat/completions", "application/json", Wire.chatCompletion("p", Wire.usage(186, 1, 64L))),
            decode("m-1", "application/json", body, chunking));
    assertClean(r[0]);
    assertThat(r[1].clientResponse().bodyUtf8()).isEqualTo(Wire.message(FIXED_USAGE));
    assertThat(AnthropicClientView.message(r[1].clientResponse().bodyUtf8()))
        .isEqualTo(new MessagesUsage(122, 64L, 0L, 8));
    assertRewritten(r[1], 186, 64, 8, 186);
    assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:corrected)%")).isEqualTo("true");
    assertThat(service.metrics.exchangeCount(Phase.GENERATION, Outcome.REWRITTEN)).isEqualTo(1);
    // Token metrics from the Anthropic members: the whole prompt, the true and the reported cache read.
    assertThat(service.metrics.tokenCount(Wire.MODEL, "prompt")).isEqualTo(186);
    assertThat(service.metrics.tokenCount(Wire.MODEL, "cached")).isEqualTo(64);
    assertThat(service.metrics.tokenCount(Wire.MODEL, "cached_reported")).isEqualTo(186);
    assertThat(service.metrics.tokenCount(Wire.MODEL, "completion")).isEqualTo(8);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("io.disaggusage.extproc.scenario.EngineScenarioTest#chunkings")
  void streamWithTheContextLegOnMessages(String name, Chunking chunking) throws Exception {
    String stream = Wire.messageStream(Wire.messagesUsage(186, 0, null, null), GEN_USAGE, "Par", "is", ".");
    ExchangeResult[] r =
        Flows.contextFirst(
            service.envoy,
            prefill("m-2", PATH, "application/json", Wire.prefillMessage(Wire.messagesUsage(122, 1, 0L, 64L))),
            decode("m-2", "text/event-stream", stream, chunking));
    assertClean(r[0]);
    assertThat(r[0].clientResponse().bodyUtf8()).isEqualTo(Wire.prefillMessage(Wire.messagesUsage(122, 1, 0L, 64L)));
    assertThat(r[1].clientResponse().bodyUtf8())
        .isEqualTo(
            Wire.messageStream(
                "{\"input_tokens\":122,\"output_tokens\":0,\"cache_read_input_tokens\":64,\"cache_creation_input_tokens\":0}",
                FIXED_USAGE, "Par", "is", "."));
    assertThat(AnthropicClientView.stream(r[1].clientResponse().bodyUtf8())).isEqualTo(new MessagesUsage(122, 64L, 0L, 8));
    assertRewritten(r[1], 186, 64, 8, 186);
  }

  /** Concurrent flow: the decode response (usage included) reaches Envoy before the prefill body. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("io.disaggusage.extproc.scenario.EngineScenarioTest#chunkings")
  void concurrentStream(String name, Chunking chunking) throws Exception {
    String stream = Wire.messageStream(Wire.messagesUsage(186, 0, null, null), GEN_USAGE, "Par", "is");
    ExchangeResult[] r =
        Flows.generationFirst(
            service.envoy,
            prefill("m-3", PATH, "text/event-stream",
                    Wire.messageStream(Wire.messagesUsage(186, 0, null, null), Wire.messagesUsage(122, 1, 0L, 64L), "Paris"))
                .requestHeader("x-disagg-order", "concurrent"),
            decode("m-3", "text/event-stream", stream, chunking).requestHeader("x-disagg-order", "concurrent"));
    assertClean(r[0]);
    assertThat(r[1].clientResponse().bodyUtf8())
        .isEqualTo(stream.replace(Wire.messagesUsage(186, 0, null, null),
                "{\"input_tokens\":122,\"output_tokens\":0,\"cache_read_input_tokens\":64,\"cache_creation_input_tokens\":0}")
            .replace(GEN_USAGE, FIXED_USAGE));
    assertThat(AnthropicClientView.stream(r[1].clientResponse().bodyUtf8())).isEqualTo(new MessagesUsage(122, 64L, 0L, 8));
    assertRewritten(r[1], 186, 64, 8, 186);
    assertThat(service.store.waiters()).isZero();
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("io.disaggusage.extproc.scenario.EngineScenarioTest#chunkings")
  void concurrentJson(String name, Chunking chunking) throws Exception {
    ExchangeResult[] r =
        Flows.generationFirst(
            service.envoy,
            prefill("m-4", "/v1/chat/completions", "application/json", Wire.chatCompletion("p", Wire.usage(186, 1, 64L)))
                .requestHeader("x-disagg-order", "concurrent"),
            decode("m-4", "application/json", Wire.message(GEN_USAGE), chunking).requestHeader("x-disagg-order", "concurrent"));
    assertThat(r[1].clientResponse().bodyUtf8()).isEqualTo(Wire.message(FIXED_USAGE));
    assertThat(AnthropicClientView.message(r[1].clientResponse().bodyUtf8())).isEqualTo(new MessagesUsage(122, 64L, 0L, 8));
    assertRewritten(r[1], 186, 64, 8, 186);
  }

  /**
   * vLLM before it reported cache counts: {@code input_tokens} is the whole prompt on both legs, no
   * cache members. Already right: the client gets the decode worker's bytes unchanged.
   */
  @Test
  void olderVllmWithoutCacheCountsIsAlreadyRight() throws Exception {
    String body = Wire.message(Wire.messagesUsage(186, 8, null, null));
    ExchangeResult[] r =
        Flows.contextFirst(
            service.envoy,
            prefill("m-5", PATH, "application/json", Wire.prefillMessage(Wire.messagesUsage(186, 1, null, null))),
            decode("m-5", "application/json", body, Chunking.fixed(16)));
    assertClean(r[1]);
    assertThat(r[1].clientResponse().bodyUtf8()).isEqualTo(body);
    assertThat(AnthropicClientView.message(body)).isEqualTo(new MessagesUsage(186, null, null, 8));
    assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("rewritten");
    assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:corrected)%")).isEqualTo("false");
    assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:prompt_tokens)%")).isEqualTo("186");
    assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:cached_tokens)%")).isEqualTo("0");
    assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:completion_tokens)%")).isEqualTo("8");
    assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:total_tokens)%")).isEqualTo("194");
  }

  /** {@code /v1/messages/count_tokens} is not a handled path: nothing more is sent for it. */
  @Test
  void countTokensIsNotInspected() throws Exception {
    ExchangeResult r =
        Flows.run(
            service.envoy,
            Exchange.post("/v1/messages/count_tokens", "{\"model\":\"m\",\"messages\":[]}")
                .responseHeader("content-type", "application/json")
                .responseBody("{\"input_tokens\":5}"));
    assertClean(r);
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("{\"input_tokens\":5}");
    assertThat(r.messagesSent()).hasSize(1);
    assertThat(r.messagesSent().get(0).hasRequestHeaders()).isTrue();
  }
}
