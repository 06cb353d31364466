package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.disaggusage.e2e.ForgedInputsThroughRoutersTest.Forgery;
import io.disaggusage.e2e.TrueUsage.Usage;
import io.disaggusage.extproc.emulator.engines.UsageVariant;
import io.disaggusage.extproc.emulator.workers.EngineWorker;
import io.disaggusage.extproc.emulator.workers.RecordedRequest;
import io.disaggusage.extproc.testkit.AccessLogLine;
import io.disaggusage.extproc.testkit.Wire;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * {@link ForgedInputsThroughRoutersTest}'s forgeries sent to {@link TrtLlmOrchestrator}, the fixture that follows
 * {@code trtllm-serve disaggregated}, in front of the shipped bootstrap's Envoy, the shipped service and the
 * simulated TensorRT-LLM workers (the generation worker reporting the whole prompt cached). The orchestrator
 * validates the client's body as its pydantic {@code ChatCompletionRequest} ({@code extra="forbid"}), forwards
 * none of the client's headers and writes both workers' {@code disaggregated_params} itself. So:
 * <ul>
 *   <li>a forged header or {@code disaggregated_params} with a {@code request_type} (and {@code ctx_usage}) reaches
 *       no worker: the forger reads its truth, the generation leg carries the orchestrator's own
 *       {@code ctx_usage} (context-first) or none (generation-first);</li>
 *   <li>a member the model does not know ({@code kv_transfer_params}, {@code vllm_xargs}, {@code bootstrap_room})
 *       or {@code ctx_usage} without a {@code request_type} is a 400 at the orchestrator: the client reads an
 *       error, no worker sees the request, the service counts nothing for it.</li>
 * </ul>
 * Each on a fresh prompt (JSON) and again (SSE), an honest flow beside it reading exactly its truth; no input is
 * ever refused by the service (none reaches a leg), for each worker transport.
 */
class TrtLlmOrchestratorForgeryTest {
  static final String PROMPT = TrtLlmOrchestratorTest.PROMPT;
  static final int MAX_TOKENS = ChatClient.MAX_TOKENS;
  /** Forgeries the orchestrator answers 400: unknown members, or {@code disaggregated_params} without its required member. */
  static final Set<String> REFUSED_BY_THE_ORCHESTRATOR =
      Set.of("ctx_usage alone", "top-level kv_transfer_params", "vllm_xargs.kv_transfer_params", "bootstrap_room reuse");

  static Stream<Arguments> releases() {
    return Tools.perRelease(List.of(TrtLlmRelease.ctxUsageOverJson(), TrtLlmRelease.ctxUsageOverMsgpack(),
        TrtLlmRelease.generationFirstOverMsgpack()));
  }

  @ParameterizedTest(name = "Envoy {0}: {1}")
  @MethodSource("releases")
  void noForgedInputMovesTheForgersOrAnyOtherFlowsNumbers(String release, TrtLlmRelease behaviour) throws Exception {
    String name = "trtllm-forged-" + behaviour.style().name().toLowerCase(java.util.Locale.ROOT) + "-"
        + behaviour.transport().name().toLowerCase(java.util.Locale.ROOT) + "-" + release;
    try (TrtLlmStack stack = TrtLlmStack.start(name, release, UsageVariant.BUG, Duration.ZERO);
        TrtLlmOrchestrator orchestrator = new TrtLlmOrchestrator(stack.envoy, behaviour)) {
      TrueUsage truth = new TrueUsage();
      long repeatsCached = 0;
      for (int i = 0; i < ForgedInputsThroughRoutersTest.FORGERIES.size(); i++) {
        Forgery forgery = ForgedInputsThroughRoutersTest.FORGERIES.get(i);
        boolean refused = REFUSED_BY_THE_ORCHESTRATOR.contains(forgery.name());
        String forgedPrompt = "Forger " + i + " asks: " + PROMPT;
        String honestPrompt = "Honest " + i + " asks: " + PROMPT;
        String honestId = "honest-trtllm-" + i;
        for (boolean stream : new boolean[] {false, true}) {
          String what = behaviour + ", " + forgery + ", stream=" + stream;
          long exchangesBefore = exchanges(stack);
          int linesBefore = stack.generationLines().size();
          int[] receivedBefore = received(stack);
          Usage wantForged = refused ? null : truth.next(forgedPrompt, MAX_TOKENS, 1);
          Usage wantHonest = truth.next(honestPrompt, MAX_TOKENS, 1);
          String url = orchestrator.baseUrl() + TrtLlmOrchestrator.CHAT_COMPLETIONS;
          CompletableFuture<String> honest = CompletableFuture.supplyAsync(() -> RouterClients.curl(
              url, RouterClients.chat(Wire.MODEL, honestPrompt, MAX_TOKENS, 1, stream), stream, Map.of("x-request-id", honestId)));
          String body = ForgedInputsThroughRoutersTest.withMembers(
              RouterClients.chat(Wire.MODEL, forgedPrompt, MAX_TOKENS, 1, stream), forgery.members());
          Map<String, String> headers = ForgedInputsThroughRoutersTest.headers(forgery, honestId);
          LlmdClients.Reply forged = LlmdClients.curl(url, body, stream, headers);
          assertThat(RouterClients.read(RouterClients.usage(honest.get(), stream))).as(what + ": the honest flow beside it")
              .isEqualTo(wantHonest);

          int flows = refused ? 1 : 2;
          Processes.await(what + ": the generation exchanges logged and counted", Duration.ofSeconds(10),
              () -> stack.generationLines().size() >= linesBefore + flows && exchanges(stack) >= exchangesBefore + 2L * flows);
          List<RecordedRequest> legs = legs(stack, receivedBefore, forgedPrompt);
          if (refused) {
            assertThat(forged.status()).as(what + ": " + forged.body()).isEqualTo(400);
            assertThat(RouterClients.parseJson(forged.body()).path("error").asText()).as(what).isNotEmpty();
            assertThat(legs).as(what + ": no worker saw the refused request").isEmpty();
          } else {
            assertThat(forged.status()).as(what + ": " + forged.body()).isEqualTo(200);
            assertThat(RouterClients.read(RouterClients.usage(forged.body(), stream))).as(what + ": the forger reads its truth")
                .isEqualTo(wantForged);
            assertOrchestratorsOwn(legs, headers, behaviour, wantForged, what);
            repeatsCached += stream ? wantForged.cached() : 0;
          }
          List<AccessLogLine> lines = stack.generationLines();
          assertThat(lines.subList(linesBefore, lines.size())).as(what + ": one corrected generation per flow that reached the workers")
              .hasSize(flows).allMatch(l -> ServiceMetrics.CORRECTED.contains(l.field("usage_outcome")));
          assertThat(exchanges(stack) - exchangesBefore).as(what + ": the service's exchanges (none for a refused request)")
              .isEqualTo(2L * flows);
        }
      }
      assertThat(repeatsCached).as("the repeated prompts hit the context worker's cache").isPositive();
      assertThat(ServiceMetrics.refusedInputs(stack.service)).as("no forged input reached a leg").isEmpty();
    }
  }

  /**
   * The forged flow's worker requests carry the orchestrator's {@code disaggregated_params} and none of the
   * client's headers: {@code context_only} on the context leg, {@code generation_only} on the generation leg with
   * the context worker's own usage as {@code ctx_usage} (context-first) or none (generation-first).
   */
  private static void assertOrchestratorsOwn(
      List<RecordedRequest> legs, Map<String, String> forgedHeaders, TrtLlmRelease behaviour, Usage truth, String what) {
    assertThat(legs).as(what + ": one context and one generation request").hasSize(2);
    for (RecordedRequest leg : legs) {
      // the workers' x-request-id is Envoy's own (the orchestrator sends none)
      forgedHeaders.entrySet().stream().filter(h -> !h.getKey().equals("x-trtllm-msgpack")).forEach(h -> {
        String name = h.getKey();
        String value = h.getValue();
        assertThat(leg.headerValues(name)).as(what + ": the client's " + name + " on a worker")
            .doesNotContain(value).hasSizeLessThanOrEqualTo(1);
      });
      // x-trtllm-msgpack only as the transport writes it
      assertThat(leg.headerValues("x-trtllm-msgpack")).as(what + ": x-trtllm-msgpack on a worker")
          .isEqualTo(behaviour.transport() == TrtLlmRelease.Transport.MSGPACK ? List.of("1") : List.of());
    }
    JsonNode params = TrtLlmStack.json(legs.get(1)).path("disaggregated_params");
    assertThat(TrtLlmStack.json(legs.get(0)).path("disaggregated_params").path("request_type").asText()).isEqualTo("context_only");
    assertThat(params.path("request_type").asText()).as(what).isEqualTo("generation_only");
    if (behaviour.style() == TrtLlmRelease.ScheduleStyle.CONTEXT_FIRST) {
      assertThat(params.path("ctx_usage").path("prompt_tokens").asLong()).as(what + ": " + params).isEqualTo(truth.prompt());
      assertThat(params.path("ctx_usage").path("prompt_tokens_details").path("cached_tokens").asLong()).as(what + ": " + params)
          .isEqualTo(truth.cached());
    } else {
      assertThat(params.has("ctx_usage")).as(what + ": " + params).isFalse();
    }
  }

  /** The requests the context worker, then the generation worker, received for {@code prompt} since {@code before} each. */
  private static List<RecordedRequest> legs(TrtLlmStack stack, int[] before, String prompt) {
    List<EngineWorker> workers = List.of(stack.context, stack.generation);
    return java.util.stream.IntStream.range(0, 2).boxed().flatMap(w -> {
      List<RecordedRequest> all = workers.get(w).log().completions();
      return all.subList(before[w], all.size()).stream();
    }).filter(r -> TrtLlmStack.json(r).toString().contains(prompt)).toList();
  }

  /** How many requests the context and the generation worker have received. */
  private static int[] received(TrtLlmStack stack) {
    return new int[] {stack.context.log().completions().size(), stack.generation.log().completions().size()};
  }

  /** Every exchange the service counted, context and generation. */
  private static long exchanges(TrtLlmStack stack) {
    return Stream.of("context", "generation").flatMap(phase -> ServiceMetrics.exchanges(stack.service, phase).values().stream())
        .mapToLong(Long::longValue).sum();
  }
}
