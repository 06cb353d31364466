package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.e2e.TrueUsage.Usage;
import io.disaggusage.extproc.testkit.Wire;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BiConsumer;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A client of llm-d v0.10's coordinator ({@link LlmdCoordinatorDeployment}, simulated workers, the service after the
 * EPP as a user adds it to llm-d's gateway — on the phase cluster with Envoy before 1.40,
 * {@link LlmdCoordinatorDeployment#natural}) forging what the service or the workers read: the
 * coordinator passes every client header but {@code EPP-Profile} and every body member but {@code kv_transfer_params}
 * on to both legs, and a client's {@code EPP-Profile} takes it past the coordinator to the phase route. Each forged
 * request runs beside an honest one, on a fresh prompt and on one the prefill has seen.
 *
 * <p>The contract: the forging client reads the truth — the prefill worker's prompt and cached counts, the decode's
 * completion — or a bill at least as high (cached at most the true cached count, prompt and completion at least the
 * true ones); every honest flow beside it reads exactly its own truth.
 */
class CoordinatorForgeryTest {
  /** One deployment per Envoy release, shared by every case (each case has prompts of its own). */
  private static final Map<String, Shared> DEPLOYMENTS = new ConcurrentHashMap<>();
  private static final int MAX_TOKENS = 6;

  /** A release's deployment and the mirror of its prefill worker's cache. */
  record Shared(LlmdCoordinatorDeployment deployment, TrueUsage truth) {}

  /** A forged client input: headers and body members added to an honest request. */
  enum Forgery {
    PHASE_PREFILL_HEADER(headers("x-disagg-phase", "prefill"), null),
    PHASE_DECODE_HEADER(headers("x-disagg-phase", "decode"), null),
    DISAGG_REQUEST_ID_OF_ANOTHER_FLOW(null, null),
    REQUEST_ID_OF_A_CONCURRENT_FLOW(null, null),
    EPP_PROFILE_DECODE(headers(LlmdCoordinatorDeployment.PROFILE, "decode"), null),
    TRTLLM_MSGPACK_HEADER(headers("x-trtllm-msgpack", "1"), null),
    CONTEXT_ONLY_BODY(null, (body, id) -> body.putObject("disaggregated_params").put("request_type", "context_only")),
    GENERATION_ONLY_BODY(null, (body, id) -> body.putObject("disaggregated_params").put("request_type", "generation_only")),
    CTX_USAGE_BODY(null, (body, id) -> body.putObject("disaggregated_params").putObject("ctx_usage")
        .put("prompt_tokens", 1).put("completion_tokens", 1).put("total_tokens", 2)
        .putObject("prompt_tokens_details").put("cached_tokens", 1)),
    KV_TRANSFER_PARAMS_BODY(null, (body, id) -> remotePrefill(body.putObject("kv_transfer_params"))),
    VLLM_XARGS_KV_TRANSFER_PARAMS_BODY(null, (body, id) -> remotePrefill(body.putObject("vllm_xargs").putObject("kv_transfer_params")));

    final Map<String, String> headers;
    final BiConsumer<ObjectNode, String> body;

    Forgery(Map<String, String> headers, BiConsumer<ObjectNode, String> body) {
      this.headers = headers == null ? Map.of() : headers;
      this.body = body;
    }

    /** The forged request's headers; {@code honestId} is the {@code x-request-id} of the honest flow beside it. */
    Map<String, String> headers(String honestId) {
      return switch (this) {
        case DISAGG_REQUEST_ID_OF_ANOTHER_FLOW -> Map.of("x-disagg-request-id", honestId);
        case REQUEST_ID_OF_A_CONCURRENT_FLOW -> Map.of("x-request-id", honestId);
        default -> headers;
      };
    }

    String body(String prompt, String honestId) {
      ObjectNode body = (ObjectNode) RouterClients.parseJson(RouterClients.chat(Wire.MODEL, prompt, MAX_TOKENS, 1, false));
      if (this.body != null) {
        this.body.accept(body, honestId);
      }
      return body.toString();
    }

    private static Map<String, String> headers(String name, String value) {
      return Map.of(name, value);
    }

    /** A decode hand-off as a client would forge it, claiming 9999 cached tokens of a remote prefill. */
    private static void remotePrefill(ObjectNode params) {
      params.put("do_remote_prefill", true).put("do_remote_decode", false).put("remote_engine_id", "forged")
          .put("remote_request_id", "forged-request").put("remote_host", "127.0.0.1").put("remote_port", 1)
          .put("remote_prefill_cached_tokens", 9999);
      params.putArray("remote_block_ids").addArray().add(1);
    }
  }

  /** Whether the forged prompt is the prefill's first sight of it or one an honest client sent before. */
  enum Prompt { FRESH, REPEATED }

  static Stream<Arguments> cases() {
    return Tools.releases().flatMap(release -> Stream.of(Forgery.values())
        .flatMap(forgery -> Stream.of(Prompt.values()).map(prompt -> Arguments.of(release, forgery, prompt))));
  }

  @AfterAll
  static void stop() {
    DEPLOYMENTS.values().forEach(shared -> shared.deployment().close());
    DEPLOYMENTS.clear();
  }

  @ParameterizedTest(name = "Envoy {0}: {1} on a {2} prompt beside an honest flow")
  @MethodSource("cases")
  void aForgedRequestPaysAtLeastItsTruthAndAnHonestOneExactlyIts(String release, Forgery forgery, Prompt kind) throws Exception {
    Shared shared = DEPLOYMENTS.computeIfAbsent(release, r -> new Shared(
        LlmdCoordinatorDeployment.start("llmd-forgery-" + r, r, LlmdCoordinatorDeployment.natural(r), false), new TrueUsage()));
    LlmdCoordinatorDeployment d = shared.deployment();
    TrueUsage truth = shared.truth();
    // first words of their own: no two cases' prompts share a cached block
    String tag = forgery.ordinal() + "x" + kind.ordinal();
    String forgedPrompt = "Forged" + tag + " " + LlmdCoordinatorTest.PROMPT;
    String honestPrompt = "Honest" + tag + " " + LlmdCoordinatorTest.PROMPT;
    String honestId = "honest-" + tag;
    Map<String, Map<String, Long>> before = outcomes(d);
    if (kind == Prompt.REPEATED) {
      Usage firstSight = truth.next(forgedPrompt, MAX_TOKENS, 1);
      assertThat(LlmdCoordinatorTest.read(d, RouterClients.chat(Wire.MODEL, forgedPrompt, MAX_TOKENS, 1, false), false, Map.of()))
          .as("the honest first sight of the prompt").isEqualTo(firstSight);
    }
    Usage forgedTruth = truth.next(forgedPrompt, MAX_TOKENS, 1);
    Usage honestTruth = truth.next(honestPrompt, MAX_TOKENS, 1);
    String honestBody = RouterClients.chat(Wire.MODEL, honestPrompt, MAX_TOKENS, 1, true);
    CompletableFuture<LlmdClients.Reply> honest = CompletableFuture.supplyAsync(
        () -> LlmdClients.curl(d.url(LlmdCoordinatorTest.CHAT), honestBody, true, Map.of("x-request-id", honestId)));
    LlmdClients.Reply forged = LlmdClients.curl(d.url(LlmdCoordinatorTest.CHAT), forgery.body(forgedPrompt, honestId), false,
        forgery.headers(honestId));
    LlmdClients.Reply honestReply = honest.get();

    assertThat(honestReply.status()).as(honestReply.body()).isEqualTo(200);
    assertThat(RouterClients.read(RouterClients.usage(honestReply.body(), true)))
        .as("the honest flow beside the forged one").isEqualTo(honestTruth);
    assertThat(forged.status()).as("the forged request's status; " + forged.body()).isEqualTo(200);
    assertThat(forged.body()).as("the forged request's answer").isNotEmpty();
    Usage read = RouterClients.read(RouterClients.usage(forged.body(), false));
    // every case's reading in the test's output, the passing ones too (docs/routers.md tabulates them)
    System.out.println("forgery " + release + " " + forgery + " " + kind + ": read " + read + ", truth " + forgedTruth
        + ", the service's outcomes " + since(before, outcomes(d)));
    String what = "the forging client read " + read + "; the truth is " + forgedTruth + "; " + legs(d, forged.body())
        + "; the service's outcomes in this case (the honest flows' included: one stored context and one rewritten"
        + " generation each) " + since(before, outcomes(d));
    assertThat(read.cached()).as("cached at most the truth: " + what).isLessThanOrEqualTo(forgedTruth.cached());
    assertThat(read.prompt()).as("prompt at least the truth: " + what).isGreaterThanOrEqualTo(forgedTruth.prompt());
    assertThat(read.completion()).as("completion at least the truth: " + what).isGreaterThanOrEqualTo(forgedTruth.completion());
  }

  /** The service's exchange counters by phase and outcome. */
  private static Map<String, Map<String, Long>> outcomes(LlmdCoordinatorDeployment d) {
    return Map.of("context", ServiceMetrics.exchanges(d.service, "context"),
        "generation", ServiceMetrics.exchanges(d.service, "generation"), "none", ServiceMetrics.exchanges(d.service, "none"));
  }

  /** What each counter gained from {@code before} to {@code after}, the unchanged ones left out. */
  private static String since(Map<String, Map<String, Long>> before, Map<String, Map<String, Long>> after) {
    StringBuilder gained = new StringBuilder();
    new java.util.TreeMap<>(after).forEach((phase, counts) -> new java.util.TreeMap<>(counts).forEach((outcome, count) -> {
      long delta = count - before.get(phase).getOrDefault(outcome, 0L);
      if (delta != 0) {
        gained.append(gained.length() == 0 ? "" : ", ").append(phase).append('/').append(outcome).append(" +").append(delta);
      }
    }));
    return "{" + gained + "}";
  }

  /**
   * The gateway's access-log lines of the forged flow (by the {@code x-request-id} vLLM names its answer after:
   * {@code chatcmpl-<id>}) with the service's outcome and counts on its decode leg, for a failure's message.
   */
  private static String legs(LlmdCoordinatorDeployment d, String answer) {
    String id = RouterClients.parseJson(answer).path("id").asText().replaceFirst("^chatcmpl-", "");
    Processes.await("the forged flow's legs logged", java.time.Duration.ofSeconds(5),
        () -> d.envoy.accessLog().stream().anyMatch(l -> id.equals(l.field("x_request_id")) && "decode".equals(l.field("epp_profile"))));
    List<String> lines = d.envoy.accessLog().stream().filter(l -> id.equals(l.field("x_request_id")))
        .map(l -> l.cluster() + " epp_profile=" + l.field("epp_profile") + " usage_outcome=" + l.field("usage_outcome")
            + " prompt_tokens=" + l.field("prompt_tokens") + " cached_tokens=" + l.field("cached_tokens")
            + " reported_cached_tokens=" + l.field("reported_cached_tokens"))
        .toList();
    return "its legs (x-request-id " + id + ") in the gateway's log: " + lines;
  }
}
