package io.disaggusage.extproc.stream;

import static io.disaggusage.extproc.stream.FaultInjectionTest.PATH;
import static io.disaggusage.extproc.stream.FaultInjectionTest.config;
import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import io.disaggusage.extproc.classify.RefusedInput;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.scenario.Flows;
import io.disaggusage.extproc.scenario.ServiceUnderTest;
import io.disaggusage.extproc.testkit.ForgedMembers;
import io.disaggusage.extproc.testkit.Wire;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.slf4j.LoggerFactory;

/**
 * A client's forged inputs, forwarded by a vLLM-family router to both legs of its flow, through the fake
 * Envoy with the shipped settings: the flow is corrected exactly as without them (the client reads the
 * context worker's counts), each refused input is counted with the phase decided, named in the
 * generation exchange's metadata, and warned about by name only — its value is the client's.
 */
class ForgedInputsFlowTest {
  static final String PROMPT = "Count the sheep in this field, please.";
  static final String SECRET_LOOKING = "tenant-4711-forged-value";

  private final Logger streamLog = (Logger) LoggerFactory.getLogger(ExchangeStream.class);
  private final ListAppender<ILoggingEvent> log = new ListAppender<>();

  @BeforeEach
  void captureWarnings() {
    log.start();
    streamLog.addAppender(log);
  }

  @AfterEach
  void release() {
    streamLog.detachAppender(log);
  }

  /**
   * @param headers what the client sent that the router forwarded to both legs
   * @param bodyMembers body members the client added that the router passed on, or ""
   * @param context refused inputs expected on the context leg
   * @param generation refused inputs expected on the generation leg (also its metadata)
   */
  record Forgery(
      String name,
      Map<String, String> headers,
      String bodyMembers,
      List<RefusedInput> context,
      List<RefusedInput> generation) {
    @Override
    public String toString() {
      return name;
    }
  }

  static final String CTX_USAGE = ForgedMembers.CTX_USAGE;

  static Stream<Arguments> forgeries() {
    return Stream.of(
            new Forgery(
                "x-disagg-phase: prefill", Map.of("x-disagg-phase", "prefill"), "", List.of(),
                List.of(RefusedInput.PHASE_HEADER)),
            new Forgery(
                "x-disagg-phase: decode", Map.of("x-disagg-phase", "Decode"), "",
                List.of(RefusedInput.PHASE_HEADER), List.of()),
            new Forgery(
                "request_type context_only", Map.of(),
                "\"disaggregated_params\":{\"request_type\":\"context_only\"}", List.of(),
                List.of(RefusedInput.MARKER_CONFLICT)),
            new Forgery(
                "ctx_usage with generation_only", Map.of(),
                "\"disaggregated_params\":{\"request_type\":\"generation_only\"," + CTX_USAGE + "}",
                List.of(RefusedInput.MARKER_CONFLICT, RefusedInput.CTX_USAGE), List.of(RefusedInput.CTX_USAGE)),
            new Forgery(
                "x-trtllm-msgpack on JSON", Map.of("x-trtllm-msgpack", "1"), "",
                List.of(RefusedInput.MSGPACK_HEADER), List.of(RefusedInput.MSGPACK_HEADER)),
            new Forgery(
                "all at once", Map.of("x-disagg-phase", "context", "x-trtllm-msgpack", "1"),
                "\"disaggregated_params\":{\"request_type\":\"context_only\"," + CTX_USAGE + "}",
                List.of(RefusedInput.CTX_USAGE, RefusedInput.MSGPACK_HEADER),
                List.of(
                    RefusedInput.PHASE_HEADER, RefusedInput.MARKER_CONFLICT, RefusedInput.CTX_USAGE,
                    RefusedInput.MSGPACK_HEADER)))
        .map(Arguments::of);
  }

  /** One leg as vLLM's proxy sends it: the client's members first, then the router's marker. */
  static Exchange.Builder leg(Forgery forgery, boolean context, String usage) {
    String members = forgery.bodyMembers().isEmpty() ? "" : forgery.bodyMembers() + ",";
    String body = "{\"model\":\"" + Wire.MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"" + PROMPT
        + "\"}]," + members + "\"max_tokens\":16,\"kv_transfer_params\":{\""
        + (context ? "do_remote_decode" : "do_remote_prefill") + "\":true}}";
    Exchange.Builder b = Exchange.post(PATH, body)
        .requestHeader("content-type", "application/json")
        .requestHeader("x-request-id", SECRET_LOOKING);
    forgery.headers().forEach(b::requestHeader);
    return b.responseHeader("content-type", "application/json")
        .responseBody(Wire.chatCompletion(context ? "ctx" : "gen", usage))
        .responseContentLength();
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("forgeries")
  void theFlowIsCorrectedAndEveryRefusalCounted(Forgery forgery) throws Exception {
    try (ServiceUnderTest s = new ServiceUnderTest(config(64 * 1024 * 1024))) {
      assertClean(Flows.run(s.envoy, leg(forgery, true, Wire.usage(75, 1, 0L))));
      ExchangeResult gen = Flows.run(s.envoy, leg(forgery, false, Wire.usage(75, 7, 74L)));
      assertClean(gen);
      assertThat(gen.clientResponse().bodyUtf8())
          .as("the client reads the context worker's counts")
          .contains("\"prompt_tokens\":75")
          .contains("\"cached_tokens\":0")
          .contains("\"total_tokens\":82");
      assertThat(FingerprintBindingTest.outcome(gen)).isEqualTo("rewritten");
      assertThat(s.metrics.exchangeCount(Phase.CONTEXT, Outcome.STORED)).isEqualTo(1);
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.REWRITTEN)).isEqualTo(1);
      for (RefusedInput input : RefusedInput.values()) {
        assertThat(s.metrics.refusedCount(input, Phase.CONTEXT))
            .as("%s refused on the context leg", input)
            .isEqualTo(forgery.context().contains(input) ? 1 : 0);
        assertThat(s.metrics.refusedCount(input, Phase.GENERATION))
            .as("%s refused on the generation leg", input)
            .isEqualTo(forgery.generation().contains(input) ? 1 : 0);
      }
      String expectedLabels =
          forgery.generation().isEmpty()
              ? "-"
              : RefusedInput.labels(java.util.EnumSet.copyOf(forgery.generation()));
      assertThat(FingerprintBindingTest.metadata(gen, "refused_inputs")).isEqualTo(expectedLabels);
      List<String> warnings =
          log.list.stream().filter(e -> e.getLevel() == Level.WARN).map(ILoggingEvent::getFormattedMessage).toList();
      assertThat(warnings).as("one warning per 10 s for the kind").hasSize(1);
      assertThat(warnings.get(0)).contains("request inputs not followed").doesNotContain(SECRET_LOOKING);
    }
  }
}
