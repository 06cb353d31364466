package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.AccessLogLine;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.testkit.InstalledTools;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import io.disaggusage.extproc.testkit.ShippedBootstrap.Topology;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Envoy's own token meter — the {@code ai_protocol_manager} filter of Envoy 1.40 — beside the service,
 * as {@code deploy/envoy/ai-protocol-manager/envoy.yaml} places it: listed before the ext_proc filter,
 * so it runs after it on the response and records the corrected usage, read back from the access log
 * (its typed record through {@code %CEL(...)%}) and from its counters. Moved after the ext_proc filter
 * it records the worker's raw numbers while the client still gets the corrected ones; and a raw record
 * made first turns the corrected one into a {@code token_usage_duplicate}. Those two are the warnings
 * docs/observability.md gives; these tests back them. JSON bodies and SSE streams, Envoy 1.40.0.
 */
class EnvoyTokenMeterTest {
  /** The first Envoy release with the filter; the one scripts/install-test-tools pins. */
  static final String RELEASE = "1.40.0";
  static final String METER = "envoy.filters.http.ai_protocol_manager";
  static final Path COMPOSITION = Tools.root().resolve("deploy/envoy/ai-protocol-manager/envoy.yaml");
  /** What the generation worker reports: the whole prompt as cached. */
  static final int RAW_CACHED = VllmWorkers.PROMPT;

  @ParameterizedTest(name = "stream={0}")
  @ValueSource(booleans = {false, true})
  void theShippedOrderRecordsTheCorrectedUsage(boolean stream) {
    try (Stack stack = start("meter-shipped-" + stream, UnaryOperator.identity())) {
      String body = VllmFlow.chatPair(stack, "shipped-" + stream, stream);
      assertThat(body).as("what the client reads").contains("\"cached_tokens\":" + VllmWorkers.CACHED);

      AccessLogLine line = generationLine(stack);
      assertThat(line.field("cached_tokens")).as("the service's own metadata").isEqualTo("" + VllmWorkers.CACHED);
      assertThat(line.field("envoy_cached_tokens")).as("Envoy's record; %s", line).isEqualTo("" + VllmWorkers.CACHED);
      assertThat(line.field("envoy_input_tokens")).isEqualTo("" + VllmWorkers.PROMPT);
      assertThat(line.field("envoy_output_tokens")).isEqualTo("" + VllmWorkers.COMPLETION);
      assertThat(line.field("envoy_total_tokens")).isEqualTo("" + (VllmWorkers.PROMPT + VllmWorkers.COMPLETION));
      Map<String, Long> counters = meterCounters(stack);
      System.out.printf("shipped order, stream=%s: %s%n  %s%n", stream, counters, line);
      assertThat(counters).as("the meter's counters: one record, the generation leg's")
          .containsEntry(counter("token_usage_found"), 1L).doesNotContainKey(counter("token_usage_duplicate"));
    }
  }

  @ParameterizedTest(name = "stream={0}")
  @ValueSource(booleans = {false, true})
  void listedAfterTheExtProcFilterItRecordsTheWorkersRawNumbers(boolean stream) {
    try (Stack stack = start("meter-after-" + stream, EnvoyTokenMeterTest::meterAfterExtProc)) {
      String body = VllmFlow.chatPair(stack, "after-" + stream, stream);
      assertThat(body).as("what the client reads, either order").contains("\"cached_tokens\":" + VllmWorkers.CACHED);

      AccessLogLine line = generationLine(stack);
      assertThat(line.field("cached_tokens")).isEqualTo("" + VllmWorkers.CACHED);
      assertThat(line.field("envoy_cached_tokens")).as("Envoy's record; %s", line).isEqualTo("" + RAW_CACHED);
      System.out.printf("meter after ext_proc, stream=%s: %s%n", stream, line);
    }
  }

  @Test
  void aRawRecordMadeFirstTurnsTheCorrectedOneIntoADuplicate() {
    try (Stack stack = start("meter-both", EnvoyTokenMeterTest::secondMeterAfterExtProc)) {
      VllmFlow.chatPair(stack, "both", true);
      AccessLogLine line = generationLine(stack);
      assertThat(line.field("envoy_cached_tokens")).as("the first writer's record; %s", line).isEqualTo("" + RAW_CACHED);
      Map<String, Long> counters = meterCounters(stack);
      System.out.printf("two meters, the raw one first: %s%n", counters);
      assertThat(counters).containsEntry(counter("token_usage_duplicate"), 1L);
      assertThat(counters.get(counter("token_usage_found"))).as("records made, the dropped one included").isPositive();
    }
  }

  @Test
  void theCompositionIsTheShippedBootstrapPlusTheMeterAndItsLogFields() throws Exception {
    ObjectNode composition = (ObjectNode) ShippedBootstrap.YAML.readTree(COMPOSITION.toFile());
    ObjectNode shipped = (ObjectNode) ShippedBootstrap.YAML.readTree(Tools.shippedBootstrap().toFile());
    ArrayNode filters = generationFilters(composition);
    assertThat(filters.get(0).path("name").asText()).as("first on the generation listener").isEqualTo(METER);
    filters.remove(0);
    JsonNode format = ShippedBootstrap.named(composition.path("static_resources"), "listeners", "generation_egress")
        .at("/filter_chains/0/filters/0/typed_config/access_log/0/typed_config/log_format/text_format_source");
    String printed = format.path("inline_string").asText();
    assertThat(printed).contains("envoy_cached_tokens=%CEL(");
    ((ObjectNode) format).put("inline_string", printed.replaceAll(" envoy_\\w+=%CEL\\([^ ]*\\)%", ""));
    assertThat(composition).as("everything else as deploy/envoy/envoy.yaml has it").isEqualTo(shipped);
  }

  // ---- the stack and the flow ---------------------------------------------------------------------

  private static Stack start(String name, UnaryOperator<ObjectNode> placement) {
    Stack stack = Stack.start(name, RELEASE, 1, InstalledTools.serviceCommand(),
        (Topology topology) -> placement.apply(ShippedBootstrap.rewrite(COMPOSITION, topology)),
        ServiceProcess.EXCHANGE_LINES);
    stack.context.answer(VllmWorkers::prefill);
    stack.generation.answer(VllmWorkers::decode);
    return stack;
  }

  private static AccessLogLine generationLine(Stack stack) {
    Processes.await("the generation leg's access log line", Duration.ofSeconds(5),
        () -> !stack.envoy.accessLog("generation").isEmpty());
    return stack.envoy.accessLog("generation").get(0);
  }

  /** The meter's counters (Envoy 1.40 keeps them under one global prefix, not per listener). */
  private static Map<String, Long> meterCounters(Stack stack) {
    Map<String, Long> counters = new java.util.TreeMap<>(stack.envoy.stats("ai_protocol_manager."));
    counters.values().removeIf(v -> v == 0); // the counters that moved; an absent one reads as 0 below
    return counters;
  }

  private static String counter(String name) {
    return "ai_protocol_manager." + name;
  }

  // ---- placements -----------------------------------------------------------------------------------

  private static ArrayNode generationFilters(ObjectNode bootstrap) {
    return ShippedBootstrap.httpFilters(bootstrap, "generation_egress");
  }

  /** The meter moved to just after the ext_proc filter (before the router). */
  static ObjectNode meterAfterExtProc(ObjectNode bootstrap) {
    ArrayNode filters = generationFilters(bootstrap);
    JsonNode meter = filters.remove(ShippedBootstrap.indexOf(filters, METER));
    filters.insert(ShippedBootstrap.indexOf(filters, "envoy.filters.http.ext_proc") + 1, meter);
    return bootstrap;
  }

  /** The shipped meter stays; a second one (same namespace) goes just after the ext_proc filter. */
  static ObjectNode secondMeterAfterExtProc(ObjectNode bootstrap) {
    ArrayNode filters = generationFilters(bootstrap);
    ObjectNode second = filters.get(ShippedBootstrap.indexOf(filters, METER)).deepCopy();
    second.put("name", METER + "_raw");
    filters.insert(ShippedBootstrap.indexOf(filters, "envoy.filters.http.ext_proc") + 1, second);
    return bootstrap;
  }
}
