package io.disaggusage.extproc.scenario;

import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import org.junit.jupiter.api.Test;

/**
 * vLLM's Anthropic Messages API ({@code POST /v1/messages}): what is not inspected. (Its P/D flows —
 * JSON and stream, context leg on chat completions or on messages, concurrent, older vLLM without cache
 * counts — are vectors of {@link ExchangeSpecificationTest}, read back with the official Anthropic SDK.)
 */
class MessagesScenarioTest extends ScenarioFixture {
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
