package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.AccessLogLine;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.disaggusage.e2e.ChatClient.Reading;
import io.disaggusage.e2e.TrtLlmRelease.ScheduleStyle;
import io.disaggusage.extproc.emulator.engines.UsageVariant;
import io.disaggusage.extproc.emulator.workers.EngineWorker;
import io.disaggusage.extproc.emulator.workers.RecordedRequest;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * What the OpenAI Python SDK and curl read through {@link TrtLlmOrchestrator}, the fixture standing in for
 * {@code trtllm-serve disaggregated}, when its worker calls go through a real Envoy on the shipped
 * bootstrap and the shipped jar to the shared simulated TensorRT-LLM workers. The context worker's
 * prefix is warm, so its true cached count is {@link #CACHED} of {@link #PROMPT_TOKENS}; the buggy
 * generation worker claims all {@link #PROMPT_TOKENS}. Every exchange is checked three ways: the usage
 * the client read, the generation access-log line's metadata, and the service's rewritten-exchange count.
 */
class TrtLlmOrchestratorTest {
  /** Long enough for whole 16-token blocks to sit in the context worker's prefix cache. */
  static final String PROMPT =
      "You are a careful assistant for a travel company. Answer in one short sentence, name the city only,"
          + " and do not add any greeting or explanation. Question: what is the capital of France?";
  /** The simulated tokenizer's count: a role marker, then each word and punctuation mark. */
  static final int PROMPT_TOKENS = 42;
  /** Once warm, the context worker holds every whole 16-token block before the last prompt token. */
  static final int CACHED = 32;
  static final int COMPLETION = ChatClient.MAX_TOKENS;
  /** The context worker answers this late, so a generation-first answer reaches Envoy before the context usage. */
  private static final Duration PREFILL_DELAY = Duration.ofMillis(300);

  private static final HttpClient DIRECT = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private static final Map<String, TrtLlmStack> STACKS = new ConcurrentHashMap<>();
  private static final Map<String, TrtLlmOrchestrator> ORCHESTRATORS = new ConcurrentHashMap<>();

  @AfterAll
  static void stop() {
    ORCHESTRATORS.values().forEach(TrtLlmOrchestrator::close);
    ORCHESTRATORS.clear();
    STACKS.values().forEach(TrtLlmStack::close);
    STACKS.clear();
  }

  @ParameterizedTest(name = "Envoy {0}: context-first, no ctx_usage (before #14177), buggy generation worker")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void contextFirstClientsReadTheContextWorkersCachedCount(String release) throws Exception {
    buggyReleaseFlows(release, ScheduleStyle.CONTEXT_FIRST, (stack, line) -> {
      JsonNode sent = lastBody(stack.generation);
      assertThat(sent.path("prompt_token_ids")).as("context-first hands over the context's token ids").hasSize(PROMPT_TOKENS);
      assertThat(sent.path("disaggregated_params").has("ctx_usage")).isFalse();
    });
  }

  @ParameterizedTest(name = "Envoy {0}: generation-first, the service waits for the context usage")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void generationFirstClientsReadTheContextWorkersCachedCount(String release) throws Exception {
    buggyReleaseFlows(release, ScheduleStyle.GENERATION_FIRST, (stack, line) -> {
      assertThat(durationMillis(line)).as("the generation answer was held until the context usage came, " + line)
          .isGreaterThanOrEqualTo(PREFILL_DELAY.toMillis());
      JsonNode params = lastBody(stack.generation).path("disaggregated_params");
      long id = lastBody(stack.context).path("disaggregated_params").path("disagg_request_id").asLong();
      assertThat(id).as("a snowflake id, above 2^53").isGreaterThan(1L << 53);
      assertThat(params.path("ctx_request_id").asLong()).isEqualTo(id);
      assertThat(params.path("schedule_style").asInt()).isEqualTo(1);
      assertThat(lastBody(stack.generation).has("prompt_token_ids")).as("no context response to take ids from").isFalse();
    });
  }

  /** What a test checks after each client's exchange, besides what every exchange gets. */
  private interface AfterExchange {
    void check(TrtLlmStack stack, AccessLogLine line) throws Exception;
  }

  /**
   * Every chat client through a release before ctx_usage (#14177) scheduled {@code style}, its generation
   * worker reporting the whole prompt cached (the bug), then {@code after}.
   */
  private static void buggyReleaseFlows(String release, ScheduleStyle style, AfterExchange after) throws Exception {
    TrtLlmStack stack = stack(release, UsageVariant.BUG);
    TrtLlmOrchestrator orchestrator = orchestrator(stack, release, TrtLlmRelease.beforeCtxUsage(style));
    for (ChatClient client : ChatClient.values()) {
      after.check(stack, exchange(stack, orchestrator, client, PROMPT_TOKENS));
    }
  }

  @ParameterizedTest(name = "Envoy {0}: ctx_usage (#14177) over JSON, fixed generation worker: bytes untouched")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void carriedCtxUsageOverJsonLeavesTheRightAnswerByteIdentical(String release) throws Exception {
    TrtLlmStack stack = stack(release, UsageVariant.FIXED);
    fixedReleaseFlows(stack, orchestrator(stack, release, TrtLlmRelease.ctxUsageOverJson()));
  }

  @ParameterizedTest(name = "Envoy {0}: ctx_usage over MessagePack (#16873), fixed generation worker: bytes untouched")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void carriedCtxUsageOverMsgpackLeavesTheRightAnswerByteIdentical(String release) throws Exception {
    TrtLlmStack stack = stack(release, UsageVariant.FIXED);
    fixedReleaseFlows(stack, orchestrator(stack, release, TrtLlmRelease.ctxUsageOverMsgpack()));
  }

  /**
   * The fixed worker already reports the context's figures: the service applies its rule (outcome
   * rewritten), finds nothing to change, and the client gets the worker's bytes exactly
   * ({@code corrected=false} in the metadata; the shipped access log does not print that field, so the
   * bytes are compared: the generation request the worker received, sent to it again directly).
   */
  private static void fixedReleaseFlows(TrtLlmStack stack, TrtLlmOrchestrator orchestrator) throws Exception {
    for (ChatClient client : ChatClient.values()) {
      Reading reading = exchangeReading(stack, orchestrator, client, CACHED);
      for (EngineWorker worker : List.of(stack.context, stack.generation)) {
        assertTransport(last(worker), orchestrator.release().transport());
      }
      assertThat(lastBody(stack.generation).path("disaggregated_params").path("ctx_usage").path("prompt_tokens_details")
          .path("cached_tokens").asInt()).isEqualTo(CACHED);
      if (reading.body() != null) {
        assertThat(reading.body()).as(client + ": byte for byte what the generation worker wrote").isEqualTo(replayGeneration(stack));
      }
    }
  }

  private static AccessLogLine exchange(TrtLlmStack stack, TrtLlmOrchestrator orchestrator, ChatClient client, int reportedCached)
      throws Exception {
    int linesBefore = stack.generationLines().size();
    exchangeReading(stack, orchestrator, client, reportedCached);
    return stack.generationLines().get(linesBefore);
  }

  /** One client call and the three checks every exchange gets. */
  private static Reading exchangeReading(TrtLlmStack stack, TrtLlmOrchestrator orchestrator, ChatClient client, int reportedCached)
      throws Exception {
    String what = "Envoy " + stack.envoy.release() + ", " + orchestrator.release() + ", " + client;
    long rewrittenBefore = stack.service.exchanges("generation", "rewritten");
    int linesBefore = stack.generationLines().size();

    Reading reading = client.call(orchestrator.baseUrl(), PROMPT);

    JsonNode usage = reading.usage();
    assertThat(usage.path("prompt_tokens").asInt()).as(what + ": " + usage).isEqualTo(PROMPT_TOKENS);
    assertThat(usage.path("prompt_tokens_details").path("cached_tokens").asInt()).as(what + ": " + usage).isEqualTo(CACHED);
    assertThat(usage.path("completion_tokens").asInt()).as(what + ": " + usage).isEqualTo(COMPLETION);
    assertThat(usage.path("total_tokens").asInt()).as(what + ": " + usage).isEqualTo(PROMPT_TOKENS + COMPLETION);

    Processes.await(what + ": its generation access-log line", Duration.ofSeconds(5), () -> stack.generationLines().size() > linesBefore);
    AccessLogLine line = stack.generationLines().get(linesBefore);
    assertThat(stack.generationLines()).as(what + ": one generation exchange").hasSize(linesBefore + 1);
    assertThat(line.field("usage_outcome")).as(what + ": " + line).isEqualTo("rewritten");
    assertThat(line.field("cached_tokens")).as(what + ": " + line).isEqualTo(Integer.toString(CACHED));
    assertThat(line.field("reported_cached_tokens")).as(what + ": " + line).isEqualTo(Integer.toString(reportedCached));
    Processes.await(what + ": counted as rewritten", Duration.ofSeconds(5),
        () -> stack.service.exchanges("generation", "rewritten") - rewrittenBefore == 1);
    return reading;
  }

  private static TrtLlmStack stack(String release, UsageVariant variant) {
    return STACKS.computeIfAbsent(release + "-" + variant.label(), key -> {
      TrtLlmStack stack = TrtLlmStack.start("trtllm-" + key, release, variant, PREFILL_DELAY);
      warm(stack);
      return stack;
    });
  }

  private static TrtLlmOrchestrator orchestrator(TrtLlmStack stack, String release, TrtLlmRelease behaviour) {
    return ORCHESTRATORS.computeIfAbsent(release + "-" + behaviour, key -> new TrtLlmOrchestrator(stack.envoy, behaviour));
  }

  /**
   * Prefills {@link #PROMPT} on the context worker directly, twice, so that every later context call
   * finds the same warm prefix; the second answer is the worker's true count.
   */
  private static void warm(TrtLlmStack stack) {
    JsonNode usage = stack.warm(PROMPT, COMPLETION);
    assertThat(usage.path("prompt_tokens").asInt()).as("the prompt's tokens " + usage).isEqualTo(PROMPT_TOKENS);
    assertThat(usage.path("prompt_tokens_details").path("cached_tokens").asInt()).as("the warm prefix " + usage).isEqualTo(CACHED);
  }

  /** A worker request as the release writes it, reaching the worker through Envoy and the service unchanged. */
  private static void assertTransport(RecordedRequest sent, TrtLlmRelease.Transport transport) {
    assertThat(sent.headerValues("content-type")).containsExactly("application/json");
    if (transport == TrtLlmRelease.Transport.MSGPACK) {
      assertThat(sent.headerValues("x-trtllm-msgpack")).containsExactly("1");
      assertThat(sent.body()[0] & 0xf0).as("a MessagePack fixmap").isEqualTo(0x80);
    } else {
      assertThat(sent.headerValues("x-trtllm-msgpack")).isEmpty();
      assertThat(sent.body()[0]).isEqualTo((byte) '{');
    }
  }

  private static RecordedRequest last(EngineWorker worker) {
    List<RecordedRequest> received = worker.log().completions();
    return received.get(received.size() - 1);
  }

  /** The generation worker's answer to the last request it received, sent again without Envoy. */
  private static String replayGeneration(TrtLlmStack stack) throws Exception {
    RecordedRequest last = last(stack.generation);
    HttpRequest.Builder again = HttpRequest.newBuilder(URI.create(stack.generation.url() + "v1/chat/completions"))
        .POST(HttpRequest.BodyPublishers.ofByteArray(last.body()));
    for (String header : List.of("content-type", "x-trtllm-msgpack")) {
      last.headerValues(header).forEach(value -> again.header(header, value));
    }
    return DIRECT.send(again.build(), HttpResponse.BodyHandlers.ofString()).body();
  }

  /** The last chat request {@code worker} received, MessagePack read as the JSON it stands for. */
  private static JsonNode lastBody(EngineWorker worker) {
    return TrtLlmStack.json(last(worker));
  }

  private static long durationMillis(AccessLogLine line) {
    return Long.parseLong(line.field("duration").replace("ms", ""));
  }
}
