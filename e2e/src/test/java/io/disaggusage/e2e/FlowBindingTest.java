package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.AccessLogLine;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.e2e.Orchestrator.Answer;
import io.disaggusage.extproc.testkit.ScenarioVectors.Leg;
import io.disaggusage.extproc.testkit.ScenarioVectors.Order;
import io.disaggusage.extproc.testkit.ScenarioVectors.Vector;
import io.disaggusage.extproc.testkit.Wire;
import io.disaggusage.extproc.emulator.engines.UsageVariant;
import io.disaggusage.extproc.emulator.workers.EngineWorker;
import io.disaggusage.extproc.emulator.workers.RecordedRequest;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Issue 16 through real Envoy on every pinned release, the shipped bootstrap and the jar as shipped: a
 * context usage is bound to (key, prompt fingerprint), so neither a colliding {@code X-Request-Id} nor a
 * forged context leg moves another flow's numbers. The legs are vLLM P/D proxy legs
 * ({@code kv_transfer_params}, as in the scenario vectors); each flow's context worker reports its own
 * prompt and cached counts, and its generation worker the whole prompt as cached (the decode bug). Every
 * client's usage, every generation access-log line and the service's counters are checked to the number.
 * The same collision and forgery run on two replicas sharing a real Redis (context through one, generation
 * through the other), a collision on TensorRT-LLM MessagePack chat legs (TensorRT-LLM completions legs are
 * unbound by design, docs/behaviour.md), and with {@code classification.trust_id_header: true}, which gives
 * the binding up for header-settled exchanges.
 */
class FlowBindingTest {
  private static final Stacks STACKS = new Stacks("binding", 1);
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String PATH = "/v1/chat/completions";

  /** One tenant: its prompt, what the context worker reports for it, and the generation worker's completion count. */
  record Tenant(String prompt, long promptTokens, long cached, long completion) {
    /** The generation worker's usage: vLLM's decode counts the whole transferred prompt as cached. */
    String reported() {
      return Wire.usage(promptTokens, completion, promptTokens);
    }

    /** What this tenant's client must read: its own context's prompt and cached counts. */
    String corrected() {
      return Wire.usage(promptTokens, completion, cached);
    }

    /** Its two legs under the given headers (the key the test makes them share); SSE or JSON generation. */
    Vector flow(Order order, boolean stream, Map<String, String> contextHeaders, Map<String, String> generationHeaders) {
      String generation = stream ? Wire.chatStream(reported(), "Par", "is") : Wire.chatCompletion("gen", reported());
      return new Vector(prompt.substring(0, Math.min(24, prompt.length())), order,
          new Leg(PATH, contextHeaders, null, request(true, false), "application/json",
              utf8(Wire.chatCompletion("ctx", Wire.usage(promptTokens, 1, cached)))),
          new Leg(PATH, generationHeaders, null, request(false, stream), stream ? "text/event-stream" : "application/json",
              utf8(generation)),
          utf8(generation.replace(reported(), corrected())));
    }

    private byte[] request(boolean context, boolean stream) {
      ObjectNode body = JSON.createObjectNode().put("model", Wire.MODEL);
      body.putArray("messages").addObject().put("role", "user").put("content", prompt);
      body.put("max_tokens", context ? 1 : 64);
      if (stream) {
        body.put("stream", true).putObject("stream_options").put("include_usage", true);
      }
      body.putObject("kv_transfer_params").put(context ? "do_remote_decode" : "do_remote_prefill", true);
      return utf8(body.toString());
    }
  }

  static final Tenant A = new Tenant("Tenant A asks: what is the capital of France?", 120, 64, 9);
  static final Tenant B = new Tenant("Tenant B asks for a long essay on the history of the Loire valley.", 610, 0, 7);
  static final Tenant VICTIM = new Tenant("Victim's long document, summarise it: " + "lorem ipsum ".repeat(40), 450, 384, 12);
  static final Tenant ATTACKER = new Tenant("hi", 3, 0, 5);

  @AfterAll
  static void stop() {
    STACKS.close();
  }

  @ParameterizedTest(name = "Envoy {0}")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void twoFlowsUnderOneRequestIdEachReadTheirOwnUsage(String release) {
    Stack stack = STACKS.get(release);
    collidingRequestIds(stack, stack, "sdk-fixed-id-" + release);
  }

  @ParameterizedTest(name = "Envoy {0}")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void aForgedContextLegMovesNobodysNumbers(String release) {
    Stack stack = STACKS.get(release);
    long bodies = ServiceMetrics.messages(stack.service(), "request_body");
    forgedContext(stack, stack, "victim-flow-" + release);
    assertThat(ServiceMetrics.messages(stack.service(), "request_body") - bodies)
        .as("every leg's request body was read for its fingerprint").isGreaterThanOrEqualTo(4);
  }

  /**
   * Sixteen flows under one {@code X-Request-Id}, all at once: even ones context-first, odd ones
   * concurrent ({@code x-disagg-order: concurrent}, the context answered late while the generation waits
   * and the other flows' contexts land under the same key); JSON and SSE generations.
   */
  @ParameterizedTest(name = "Envoy {0}")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void sixteenConcurrentFlowsUnderOneRequestIdEachReadTheirOwnUsage(String release) throws Exception {
    Stack stack = STACKS.get(release);
    List<Tenant> tenants = new ArrayList<>();
    for (int i = 0; i < 16; i++) {
      tenants.add(new Tenant("Tenant " + i + " asks about chapter " + i + " of the shared report, in " + (i + 2) + " lines.",
          100 + 37L * i, 16L * i, 4 + i));
    }
    List<Vector> flows = sixteen(tenants, "sdk-fixed-id-concurrent-" + release);
    VectorFlow.serve(stack, stack, flows);
    // Every path once, one flow at a time under another key (as LlmdSidecarTest does), so that the burst
    // meets a warm service rather than Envoy's 200 ms message timeout on a saturated 2-core host.
    sixteen(tenants, "warm-up-" + release).forEach(v -> VectorFlow.send(stack, stack, v));
    Counts before = Counts.of(stack, stack);
    EnvoyCounters envoyBefore = EnvoyCounters.read(stack.envoy);
    int logged = stack.envoy.accessLog("generation").size();

    ExecutorService orchestrators = Executors.newFixedThreadPool(flows.size());
    List<VectorFlow.Result> results = new ArrayList<>();
    try {
      List<CompletableFuture<VectorFlow.Result>> running = flows.stream()
          .map(v -> CompletableFuture.supplyAsync(() -> VectorFlow.send(stack, stack, v), orchestrators)).toList();
      for (CompletableFuture<VectorFlow.Result> r : running) {
        results.add(r.get());
      }
    } finally {
      orchestrators.shutdownNow();
    }

    Map<String, Long> failedOpen = EnvoyCounters.failures(envoyBefore.movedTo(EnvoyCounters.read(stack.envoy)));
    failedOpen.keySet().removeIf(name -> name.endsWith("override_message_timeout_ignored")); // harmless (RealEnvoyFlowsTest)
    assertThat(failedOpen).as("exchanges Envoy let through unprocessed").isEmpty();
    List<String> expectedLines = new ArrayList<>();
    for (int i = 0; i < flows.size(); i++) {
      Tenant t = tenants.get(i);
      assertThat(results.get(i).context().text()).isEqualTo(flows.get(i).context().responseUtf8());
      assertReads(results.get(i).generation(), flows.get(i), t, t.corrected());
      expectedLines.add(logged(t.promptTokens, t.cached, t.completion, t.promptTokens));
    }
    assertThat(generationLines(stack.envoy, logged, flows.size()).stream().map(FlowBindingTest::logged).toList())
        .as("each flow's numbers logged once, all rewritten").containsExactlyInAnyOrderElementsOf(expectedLines);
    before.assertCounted(Map.of("stored", 16L), Map.of("rewritten", 16L));
  }

  /**
   * A generation whose key holds only another prompt's usage: context-first (decided at the response
   * headers) and concurrent (after the wait). The client gets the worker's bytes; the other flow's entry
   * stays for its own generation; the warning names the key's source, never the key or the prompt.
   */
  @ParameterizedTest(name = "Envoy {0}")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void aGenerationWhoseKeyHoldsOnlyAnotherPromptsUsagePassesThroughUnchanged(String release) throws IOException {
    Stack stack = STACKS.get(release);
    List<String> keys = new ArrayList<>();
    for (boolean concurrent : new boolean[] {false, true}) {
      String key = "mismatch-" + (concurrent ? "concurrent-" : "context-first-") + release;
      keys.add(key);
      Map<String, String> headers = concurrent ? Map.of("x-request-id", key, "x-disagg-order", "concurrent") : Map.of("x-request-id", key);
      Vector other = B.flow(Order.CONTEXT_FIRST, false, Map.of("x-request-id", key), Map.of("x-request-id", key));
      Vector mine = A.flow(Order.CONTEXT_FIRST, concurrent, headers, headers); // the concurrent one streams
      VectorFlow.serve(stack, stack, List.of(other, mine));
      Counts before = Counts.of(stack, stack);
      int logged = stack.envoy.accessLog("generation").size();

      assertThat(VectorFlow.context(stack, other).join().text()).isEqualTo(other.context().responseUtf8());
      Answer passed = VectorFlow.generation(stack, mine).join();
      assertReads(passed, mine, A, A.reported());
      AccessLogLine line = generationLines(stack.envoy, logged, 1).get(0);
      // After the wait, or at once for a context-first miss (read for counts that cannot be true,
      // ordering.clamp_without_context), the metadata carries the worker's own numbers.
      assertThat(logged(line)).as(line.toString()).isEqualTo(logged("fingerprint_mismatch", 120, 120, 9, 120));
      assertThat(line.field("model")).isEqualTo(Wire.MODEL);
      before.assertCounted(Map.of("stored", 1L), Map.of("fingerprint_mismatch", 1L));

      assertReads(VectorFlow.generation(stack, other).join(), other, B, B.corrected());
      assertThat(logged(generationLines(stack.envoy, logged + 1, 1).get(0))).isEqualTo(logged(610, 0, 7, 610));
    }
    List<String> log = Files.readAllLines(stack.service().log(), StandardCharsets.UTF_8);
    assertThat(log).as("the service's warning").anySatisfy(l -> assertThat(l).contains("this x-request-id key belongs to another prompt"));
    assertThat(log).as("no key value or prompt text logged")
        .noneSatisfy(l -> assertThat(l).containsAnyOf(keys.get(0), keys.get(1), "Tenant A", "Loire"));
  }

  /** Cases 1 and 2 with two replicas on one real Redis: each context through replica 1, each generation through replica 2. */
  @ParameterizedTest(name = "Envoy {0}")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void replicasSharingRedisKeepEachFlowsOwnUsage(String release) {
    try (RedisProcess redis = new RedisProcess("binding-redis-" + release).start();
        Stack first = Stack.start("binding-redis-1-" + release, release, 1, redis.storeSettings());
        Stack second = Stack.start("binding-redis-2-" + release, release, 1, redis.storeSettings())) {
      collidingRequestIds(first, second, "sdk-fixed-id-redis-" + release);
      forgedContext(first, second, "victim-flow-redis-" + release);
      assertThat(second.context.received()).as("no context leg through replica 2's Envoy").isEmpty();
      assertThat(first.generation.received()).as("no generation leg through replica 1's Envoy").isEmpty();
    }
  }

  /**
   * TensorRT-LLM since #16873, generation-first, MessagePack worker requests, through the orchestrator
   * fixture in front of the simulated TensorRT-LLM workers, with every {@code disagg_request_id} the same:
   * two chat calls at once, so both generation legs wait under one key while both contexts land there.
   * Chat legs bind by their {@code messages}.
   */
  @ParameterizedTest(name = "Envoy {0}")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void trtLlmMessagePackFlowsUnderOneRequestIdEachReadTheirOwnUsage(String release) throws Exception {
    long id = 2_748_779_069_441_239_001L;
    String promptB = "Summarise, for a tenant of another team, the three main causes of the French Revolution in the"
        + " order historians usually give them, with one date each, and do not add anything else at all. Keep every"
        + " sentence short, plain and free of any jargon, please.";
    try (TrtLlmStack stack = TrtLlmStack.start("binding-trtllm-" + release, release, UsageVariant.BUG, Duration.ofMillis(300));
        TrtLlmOrchestrator orchestrator = new TrtLlmOrchestrator(stack.envoy, TrtLlmRelease.generationFirstOverMsgpack(), () -> id)) {
      JsonNode truthA = stack.warm(TrtLlmOrchestratorTest.PROMPT, ChatClient.MAX_TOKENS);
      JsonNode truthB = stack.warm(promptB, ChatClient.MAX_TOKENS);
      assertThat(usage(truthA)).isEqualTo(List.of(42L, 32L));
      assertThat(usage(truthB)).isEqualTo(List.of(56L, 48L));
      int contextCalls = stack.context.log().completions().size();
      long rewritten = stack.service.exchanges("generation", "rewritten");
      int logged = stack.generationLines().size();

      String url = orchestrator.baseUrl() + TrtLlmOrchestrator.CHAT_COMPLETIONS;
      CompletableFuture<Answer> a = Orchestrator.post(url, Map.of(), chat(TrtLlmOrchestratorTest.PROMPT));
      CompletableFuture<Answer> b = Orchestrator.post(url, Map.of(), chat(promptB));

      int completion = ChatClient.MAX_TOKENS;
      assertThat(clientUsage(a.get())).as("client A").isEqualTo(List.of(42L, 32L, (long) completion, 42L + completion));
      assertThat(clientUsage(b.get())).as("client B").isEqualTo(List.of(56L, 48L, (long) completion, 56L + completion));
      assertThat(generationLines(stack.envoy, logged, 2).stream().map(FlowBindingTest::logged).toList())
          .containsExactlyInAnyOrder(logged(42, 32, completion, 42), logged(56, 48, completion, 56));
      Processes.await("two generations counted as rewritten", Duration.ofSeconds(5),
          () -> stack.service.exchanges("generation", "rewritten") - rewritten == 2);
      assertThat(stack.service.exchanges("generation", "fingerprint_mismatch")).isZero();

      assertThat(stack.context.log().completions()).as("two context calls after the warm-up").hasSize(contextCalls + 2);
      for (EngineWorker worker : List.of(stack.context, stack.generation)) {
        List<RecordedRequest> received = worker.log().completions();
        for (RecordedRequest sent : received.subList(received.size() - 2, received.size())) {
          assertThat(sent.headerValues("x-trtllm-msgpack")).as(worker.describe()).containsExactly("1");
          assertThat(TrtLlmStack.json(sent).path("disaggregated_params").path("disagg_request_id").asLong()).isEqualTo(id);
        }
      }
    }
  }

  /**
   * With {@code classification.trust_id_header: true} (set as its environment variable), an exchange whose
   * phase and key come from {@code x-disagg-*} headers is not read: Envoy sends the service no request
   * body, and the flow is still corrected. What opting in gives up: the legs are unbound, so the forged
   * context leg replaces the victim's usage and the victim's client reads the attacker's counts.
   */
  @ParameterizedTest(name = "Envoy {0}")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void trustingTheIdHeaderLeavesBodiesUnreadAndGivesTheBindingUp(String release) {
    try (Stack stack = Stack.start("binding-trust-" + release, release, 1, "DISAGG_USAGE_CLASSIFICATION_TRUST_ID_HEADER=true")) {
      long bodies = ServiceMetrics.messages(stack.service(), "request_body");
      Counts before = Counts.of(stack, stack);
      String id = "victim-flow-trusted-" + release;
      Vector alone = VICTIM.flow(Order.CONTEXT_FIRST, false, disaggHeaders("context", id), disaggHeaders("generation", id));
      VectorFlow.serve(stack, stack, List.of(alone));
      assertReads(VectorFlow.send(stack, stack, alone).generation(), alone, VICTIM, VICTIM.corrected());

      Forgery forged = forge(stack, stack, id);

      String attackers = Wire.usage(ATTACKER.promptTokens, VICTIM.completion, ATTACKER.cached);
      assertReads(forged.victimReads, forged.victim, VICTIM, attackers);
      assertReads(forged.attackerReads, forged.attacker, ATTACKER, ATTACKER.reported());
      List<AccessLogLine> lines = generationLines(stack.envoy, 0, 3);
      assertThat(logged(lines.get(0))).as(lines.get(0).toString()).isEqualTo(logged(450, 384, 12, 450));
      assertThat(logged(lines.get(1))).as("the victim's " + lines.get(1)).isEqualTo(logged(3, 0, 12, 450));
      assertThat(lines.get(2).field("usage_outcome")).as("the attacker's " + lines.get(2)).isEqualTo("passthrough_no_context");
      before.assertCounted(Map.of("stored", 3L), Map.of("rewritten", 2L, "passthrough_no_context", 1L));
      assertThat(ServiceMetrics.messages(stack.service(), "request_body")).as("request body messages").isEqualTo(bodies);
    }
  }

  /** The tenants' flows under one {@code X-Request-Id}: even ones context-first, odd ones concurrent; two of every four stream (SSE). */
  static List<Vector> sixteen(List<Tenant> tenants, String key) {
    List<Vector> flows = new ArrayList<>();
    for (int i = 0; i < tenants.size(); i++) {
      boolean concurrent = i % 2 == 1;
      Map<String, String> headers = concurrent ? Map.of("x-request-id", key, "x-disagg-order", "concurrent") : Map.of("x-request-id", key);
      flows.add(tenants.get(i).flow(concurrent ? Order.GENERATION_FIRST : Order.CONTEXT_FIRST, i % 4 >= 2, headers, headers));
    }
    return flows;
  }

  /** Context A, context B, generation A, generation B, all under one {@code X-Request-Id}. */
  static void collidingRequestIds(Stack contextSide, Stack generationSide, String key) {
    Map<String, String> headers = Map.of("x-request-id", key);
    Vector a = A.flow(Order.CONTEXT_FIRST, false, headers, headers);
    Vector b = B.flow(Order.CONTEXT_FIRST, true, headers, headers);
    VectorFlow.serve(contextSide, generationSide, List.of(a, b));
    Counts before = Counts.of(contextSide, generationSide);
    int logged = generationSide.envoy.accessLog("generation").size();

    contexts(contextSide, a, b);
    assertReads(VectorFlow.generation(generationSide, a).join(), a, A, A.corrected());
    assertReads(VectorFlow.generation(generationSide, b).join(), b, B, B.corrected());

    List<AccessLogLine> lines = generationLines(generationSide.envoy, logged, 2);
    assertThat(logged(lines.get(0))).as(lines.get(0).toString()).isEqualTo(logged(120, 64, 9, 120));
    assertThat(logged(lines.get(1))).as(lines.get(1).toString()).isEqualTo(logged(610, 0, 7, 610));
    before.assertCounted(Map.of("stored", 2L), Map.of("rewritten", 2L));
  }

  /** The four legs of a forgery and what the victim's and the attacker's clients read from their generations. */
  record Forgery(Vector victim, Vector attacker, Answer victimReads, Answer attackerReads) {}

  /**
   * The victim's context, the attacker's tiny context leg marked {@code x-disagg-phase: context} under the
   * victim's {@code x-disagg-request-id}, the victim's generation, then the attacker's own generation.
   */
  static Forgery forge(Stack contextSide, Stack generationSide, String victimId) {
    Vector victim = VICTIM.flow(Order.CONTEXT_FIRST, false, disaggHeaders("context", victimId), disaggHeaders("generation", victimId));
    Vector attacker = ATTACKER.flow(Order.CONTEXT_FIRST, false, disaggHeaders("context", victimId), disaggHeaders("generation", victimId));
    VectorFlow.serve(contextSide, generationSide, List.of(victim, attacker));
    contexts(contextSide, victim, attacker);
    Answer victimReads = VectorFlow.generation(generationSide, victim).join();
    return new Forgery(victim, attacker, victimReads, VectorFlow.generation(generationSide, attacker).join());
  }

  /** The forgery with the fingerprint read: the victim reads its own numbers, the attacker only its own. */
  static void forgedContext(Stack contextSide, Stack generationSide, String victimId) {
    Counts before = Counts.of(contextSide, generationSide);
    int logged = generationSide.envoy.accessLog("generation").size();

    Forgery forged = forge(contextSide, generationSide, victimId);

    assertReads(forged.victimReads, forged.victim, VICTIM, VICTIM.corrected());
    assertReads(forged.attackerReads, forged.attacker, ATTACKER, ATTACKER.corrected());
    List<AccessLogLine> lines = generationLines(generationSide.envoy, logged, 2);
    assertThat(logged(lines.get(0))).as("the victim's " + lines.get(0)).isEqualTo(logged(450, 384, 12, 450));
    assertThat(logged(lines.get(1))).as("the attacker's " + lines.get(1)).isEqualTo(logged(3, 0, 5, 3));
    before.assertCounted(Map.of("stored", 2L), Map.of("rewritten", 2L));
  }

  /** The flows' context legs one after another; their bytes reach the orchestrator unchanged. */
  static void contexts(Stack side, Vector... flows) {
    for (Vector v : flows) {
      assertThat(VectorFlow.context(side, v).join().text()).as(v + ": context bytes pass unchanged").isEqualTo(v.context().responseUtf8());
    }
  }

  static Map<String, String> disaggHeaders(String phase, String id) {
    return Map.of("x-disagg-phase", phase, "x-disagg-request-id", id);
  }

  /** The client got the generation worker's bytes with only the usage values changed, to {@code usage}. */
  static void assertReads(Answer answer, Vector v, Tenant worker, String usage) {
    assertThat(answer.status()).as(v + ": status").isEqualTo(200);
    assertThat(answer.text()).as(v + ": the client reads " + usage).contains(usage)
        .isEqualTo(v.generation().responseUtf8().replace(worker.reported(), usage));
  }

  /** The {@code count} generation lines {@code envoy} logs after its first {@code before}. */
  static List<AccessLogLine> generationLines(EnvoyProcess envoy, int before, int count) {
    Processes.await(count + " generation access-log lines", Duration.ofSeconds(5),
        () -> envoy.accessLog("generation").size() >= before + count);
    List<AccessLogLine> lines = envoy.accessLog("generation");
    assertThat(lines).as("generation access-log lines").hasSize(before + count);
    return lines.subList(before, lines.size());
  }

  /** An access-log line's outcome and numbers, as one comparable text. */
  static String logged(AccessLogLine line) {
    return fields(line.field("usage_outcome"), line.field("prompt_tokens"), line.field("cached_tokens"),
        line.field("completion_tokens"), line.field("total_tokens"), line.field("reported_cached_tokens"));
  }

  /** A {@code rewritten} line's numbers; the total is prompt + completion. */
  static String logged(long prompt, long cached, long completion, long reportedCached) {
    return logged("rewritten", prompt, cached, completion, reportedCached);
  }

  static String logged(String outcome, long prompt, long cached, long completion, long reportedCached) {
    return fields(outcome, prompt, cached, completion, prompt + completion, reportedCached);
  }

  private static String fields(String outcome, Object prompt, Object cached, Object completion, Object total, Object reportedCached) {
    return "usage_outcome=" + outcome + " prompt_tokens=" + prompt + " cached_tokens=" + cached + " completion_tokens=" + completion
        + " total_tokens=" + total + " reported_cached_tokens=" + reportedCached;
  }

  /**
   * The context outcomes counted by the context side's service and the generation outcomes by the
   * generation side's, before a case; {@link #assertCounted} compares what the case added.
   */
  record Counts(ServiceProcess contextService, Map<String, Long> context, ServiceProcess generationService, Map<String, Long> generation) {
    static Counts of(Stack contextSide, Stack generationSide) {
      return new Counts(contextSide.service(), ServiceMetrics.exchanges(contextSide.service(), "context"),
          generationSide.service(), ServiceMetrics.exchanges(generationSide.service(), "generation"));
    }

    void assertCounted(Map<String, Long> contextOutcomes, Map<String, Long> generationOutcomes) {
      assertAdded(contextService, "context", context, contextOutcomes);
      assertAdded(generationService, "generation", generation, generationOutcomes);
    }

    private static void assertAdded(ServiceProcess service, String phase, Map<String, Long> before, Map<String, Long> expected) {
      long exchanges = expected.values().stream().mapToLong(Long::longValue).sum();
      Processes.await(exchanges + " " + phase + " exchanges counted", Duration.ofSeconds(5),
          () -> added(service, phase, before).values().stream().mapToLong(Long::longValue).sum() >= exchanges);
      assertThat(added(service, phase, before)).as(phase + " outcomes counted").isEqualTo(expected);
    }

    private static Map<String, Long> added(ServiceProcess service, String phase, Map<String, Long> before) {
      Map<String, Long> added = new HashMap<>();
      ServiceMetrics.exchanges(service, phase).forEach((outcome, n) -> {
        long delta = n - before.getOrDefault(outcome, 0L);
        if (delta != 0) {
          added.put(outcome, delta);
        }
      });
      return added;
    }
  }

  private static byte[] chat(String prompt) {
    ObjectNode body = JSON.createObjectNode().put("model", Wire.MODEL);
    body.putArray("messages").addObject().put("role", "user").put("content", prompt);
    return utf8(body.put("max_tokens", ChatClient.MAX_TOKENS).toString());
  }

  /** A usage's prompt and cached counts. */
  private static List<Long> usage(JsonNode usage) {
    return List.of(usage.path("prompt_tokens").asLong(), usage.path("prompt_tokens_details").path("cached_tokens").asLong());
  }

  /** The client's usage: prompt, cached, completion, total. */
  private static List<Long> clientUsage(Answer answer) {
    assertThat(answer.status()).as(answer.text()).isEqualTo(200);
    try {
      JsonNode usage = JSON.readTree(answer.body()).path("usage");
      return List.of(usage.path("prompt_tokens").asLong(), usage.path("prompt_tokens_details").path("cached_tokens").asLong(),
          usage.path("completion_tokens").asLong(), usage.path("total_tokens").asLong());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
