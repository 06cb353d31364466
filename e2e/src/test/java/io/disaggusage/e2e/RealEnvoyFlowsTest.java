package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.AccessLogLine;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.testkit.ScenarioVectors;
import io.disaggusage.extproc.testkit.ScenarioVectors.Leg;
import io.disaggusage.extproc.testkit.ScenarioVectors.Order;
import io.disaggusage.extproc.testkit.ScenarioVectors.Vector;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every engine scenario of the server's suite — TensorRT-LLM (context first, generation first with the
 * context answered 450 ms late, {@code ctx_usage}, MessagePack requests, Responses), vLLM's P/D proxy
 * ({@code kv_transfer_params}, {@code X-Request-Id}), llm-d, SGLang (identical bodies, told apart by
 * cluster), Responses, legacy completions and Anthropic Messages, JSON and SSE — through real Envoy on
 * every pinned release with the shipped bootstrap, the jar as shipped and workers writing paced chunks.
 * Per flow it checks the bytes the orchestrator receives (only usage values change), the bytes the
 * workers receive (unchanged), the dynamic metadata in Envoy's access log, and that none of Envoy's
 * fail-open counters moved.
 */
class RealEnvoyFlowsTest {
  private static final Stacks STACKS = new Stacks("flows", 1);
  private static final Pattern CACHED = Pattern.compile("\"(?:cached_tokens|cache_read_input_tokens)\":(\\d+)");

  static Stream<Arguments> flows() {
    List<Vector> vectors = new ArrayList<>(ScenarioVectors.all());
    vectors.addAll(ScenarioVectors.messages());
    vectors.addAll(ScenarioVectors.trtMsgpack());
    vectors.add(ScenarioVectors.trtResponsesHandoff());
    return Tools.perRelease(vectors);
  }

  @AfterAll
  static void stop() {
    STACKS.close();
  }

  @ParameterizedTest(name = "Envoy {0}: {1}")
  @MethodSource("flows")
  void flowIsCorrectedThroughRealEnvoy(String release, Vector v) {
    Stack stack = STACKS.get(release);
    stack.context.clear();
    stack.generation.clear();
    int logged = generationLines(stack).size();
    EnvoyCounters before = EnvoyCounters.read(stack.envoy);

    VectorFlow.Result result = VectorFlow.run(stack, v);

    assertThat(result.generation().status()).isEqualTo(200);
    assertThat(result.generation().text()).as("generation bytes the orchestrator received")
        .isEqualTo(new String(v.expectedGeneration(), java.nio.charset.StandardCharsets.UTF_8));
    if (v.context() != null) {
      assertThat(result.context().text()).as("context bytes pass unchanged").isEqualTo(v.context().responseUtf8());
      assertReceivedUnchanged(stack.context, v.context());
    }
    assertReceivedUnchanged(stack.generation, v.generation());

    Processes.await("the generation access log line", Duration.ofSeconds(5), () -> generationLines(stack).size() > logged);
    AccessLogLine line = generationLines(stack).get(logged);
    assertThat(line.field("usage_outcome")).as(line.toString()).isEqualTo("rewritten");
    assertThat(line.field("cached_tokens")).as(line.toString()).isEqualTo(lastCached(v.expectedGeneration()));

    Map<String, Long> moved = before.movedTo(EnvoyCounters.read(stack.envoy));
    Map<String, Long> failures = EnvoyCounters.failures(moved);
    if (v.order() == Order.GENERATION_FIRST && v.generation().contentType().startsWith("text/event-stream")) {
      // A chunked stream's end can reach the service with its last event (no Envoy timer runs, so the
      // held reply's extension is ignored) or in a read of its own (a timer runs and the extension is
      // needed); the service cannot tell which, so it asks (docs/behaviour.md). At most one per flow.
      assertThat(failures.getOrDefault("generation_egress.override_message_timeout_ignored", 0L)).isLessThanOrEqualTo(1L);
      failures.remove("generation_egress.override_message_timeout_ignored");
    }
    assertThat(failures).as("Envoy's fail-open counters, all moved: " + moved).isEmpty();
    assertThat(moved).containsKey("generation_egress.streams_started");
  }

  private static List<AccessLogLine> generationLines(Stack stack) {
    return stack.envoy.accessLog("generation");
  }

  private static void assertReceivedUnchanged(Worker worker, Leg leg) {
    List<Worker.Received> received = worker.received();
    assertThat(received).as(worker + " requests").hasSize(1);
    Worker.Received request = received.get(0);
    assertThat(request.path()).isEqualTo(leg.path());
    assertThat(request.body()).as("request body reaches the worker unchanged").isEqualTo(leg.requestBody());
    leg.requestHeaders().forEach((name, value) -> assertThat(request.header(name)).as(name).isEqualTo(value));
  }

  private static String lastCached(byte[] expected) {
    Matcher m = CACHED.matcher(new String(expected, java.nio.charset.StandardCharsets.UTF_8));
    String last = "-";
    while (m.find()) {
      last = m.group(1);
    }
    return last;
  }
}
