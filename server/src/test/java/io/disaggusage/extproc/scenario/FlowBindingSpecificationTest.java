package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.OpenAiClientView;
import io.disaggusage.extproc.testkit.Wire;
import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.config.ConfigLoader;
import io.disaggusage.extproc.config.ConfigLoader.Setting;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.testkit.OpenAiClientView.ClientUsage;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.store.RedisServer;
import io.disaggusage.extproc.store.RedisStores;
import io.disaggusage.extproc.testkit.MsgpackBodies;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Issue 16 over every key source, both body encodings and both stores: flows whose legs share one
 * correlation key but not one prompt each get their own numbers — context first, generation first with
 * the other flow's context landing during the wait, many at once — and a forged context leg under the
 * victim's key moves nothing. With Redis the context leg passes one replica and the generation leg
 * another, as behind a central Deployment. The specification's cases of flow binding, with its
 * invariants checked on every exchange.
 */
@ExchangeSpecification
class FlowBindingSpecificationTest {
  static final String PATH = "/v1/chat/completions";

  /** Where the two legs' shared key comes from (behaviour.md §3), and how each source's legs look. */
  enum KeySource {
    /** vLLM's P/D proxy: {@code kv_transfer_params} decide the phase, the orchestrator's X-Request-Id the key. */
    X_REQUEST_ID,
    /** Explicit {@code x-disagg-phase} and {@code x-disagg-request-id}: the headers a forged leg carries. */
    DISAGG_HEADERS,
    /** TensorRT-LLM's {@code disaggregated_params} ids, JSON requests. */
    TRTLLM_JSON,
    /** The same in MessagePack, as TensorRT-LLM's orchestrator sends it since PR #16873. */
    TRTLLM_MSGPACK,
    /** SGLang: identical bodies keyed by bootstrap host and room, phases told apart by cluster. */
    SGLANG_ROOM;

    /** The key both flows share, spelt as this source carries it. */
    String key() {
      return switch (this) {
        case X_REQUEST_ID, DISAGG_HEADERS -> "sdk-fixed-id-4711";
        default -> "9223372036854775001"; // an int64 id above 2^53
      };
    }

    /** The request body one leg of a flow sends (as its worker receives it). */
    byte[] body(String key, String prompt, boolean context, boolean waitForContext) {
      String start = "{\"model\":\"" + Wire.MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"" + prompt
          + "\"}],\"max_tokens\":" + (context ? 1 : 64);
      String json =
          switch (this) {
            case X_REQUEST_ID ->
                start + ",\"kv_transfer_params\":{\"" + (context ? "do_remote_decode" : "do_remote_prefill") + "\":true}}";
            case DISAGG_HEADERS -> start + "}";
            case TRTLLM_JSON, TRTLLM_MSGPACK ->
                start + ",\"disaggregated_params\":{" + (context
                    ? "\"request_type\":\"context_only\",\"disagg_request_id\":" + key
                    : "\"request_type\":\"generation_only\",\"ctx_request_id\":" + key + ",\"disagg_request_id\":" + key)
                    + ",\"schedule_style\":" + (waitForContext ? 1 : 0) + "}}";
            case SGLANG_ROOM -> start + ",\"bootstrap_host\":\"10.1.0.5\",\"bootstrap_port\":8998,\"bootstrap_room\":" + key + "}";
          };
      return this == TRTLLM_MSGPACK
          ? MsgpackBodies.fromJson(json, MsgpackBodies.Style.COMPACT)
          : json.getBytes(StandardCharsets.UTF_8);
    }

    /** The request headers one leg carries beyond the pseudo-headers and content type. */
    Map<String, String> headers(String key, boolean context, boolean waitForContext) {
      Map<String, String> h = new LinkedHashMap<>();
      switch (this) {
        case X_REQUEST_ID -> h.put("x-request-id", key);
        case DISAGG_HEADERS -> {
          h.put("x-disagg-phase", context ? "context" : "generation");
          h.put("x-disagg-request-id", key);
        }
        case TRTLLM_MSGPACK -> h.put("X-TRTLLM-Msgpack", "1");
        default -> {}
      }
      if (waitForContext && (this == X_REQUEST_ID || this == DISAGG_HEADERS)) {
        h.put("x-disagg-order", "concurrent");
      }
      return h;
    }

    /** The upstream cluster: only SGLang's identical bodies need it to tell the phases apart. */
    String cluster(boolean context) {
      return this != SGLANG_ROOM ? null : context ? ServiceUnderTest.CONTEXT_CLUSTER : ServiceUnderTest.GENERATION_CLUSTER;
    }

    Exchange.Builder leg(String key, String prompt, boolean context, boolean waitForContext) {
      Exchange.Builder b =
          Exchange.post(PATH, "{}").requestBody(body(key, prompt, context, waitForContext)); // content-length follows
      headers(key, context, waitForContext).forEach(b::requestHeader);
      String cluster = cluster(context);
      return cluster == null ? b : b.requestAttribute("xds.cluster_name", cluster);
    }

    /** The context worker's JSON reply carrying {@code usage}. */
    String contextReply(String key, String usage) {
      return this == TRTLLM_JSON || this == TRTLLM_MSGPACK
          ? Wire.trtContextResponse(key, key, usage)
          : Wire.chatCompletion("ctx", usage);
    }
  }

  enum StoreKind {
    MEMORY,
    REDIS
  }

  /** One flow: its prompt, and its true numbers (what its client must read). */
  record Flow(String prompt, long promptTokens, long cachedTokens, long completionTokens) {
    Exchange.Builder context(KeySource source, String key) {
      return source.leg(key, prompt, true, false)
          .responseHeader("content-type", "application/json")
          .responseBody(source.contextReply(key, Wire.usage(promptTokens, 1, cachedTokens)))
          .responseContentLength()
          .responseChunking(Chunking.fixed(41));
    }

    /** The generation leg: its worker reports the whole prompt as cached, the bug being corrected. */
    Exchange.Builder generation(KeySource source, String key, boolean waitForContext) {
      String usage = Wire.usage(promptTokens, completionTokens, promptTokens);
      Exchange.Builder b = source.leg(key, prompt, false, waitForContext);
      return waitForContext
          ? b.responseHeader("content-type", "text/event-stream").responseBody(Wire.chatStream(usage, "Par", "is"))
              .responseChunking(Chunking.fixed(29))
          : b.responseHeader("content-type", "application/json").responseBody(Wire.chatCompletion("gen", usage))
              .responseContentLength();
    }

    ClientUsage truth() {
      return new ClientUsage(promptTokens, cachedTokens, completionTokens, promptTokens + completionTokens);
    }
  }

  static final Flow TENANT_A = new Flow("Tenant A asks: what is the capital of France?", 120, 64, 9);
  static final Flow TENANT_B = new Flow("Tenant B asks for a long essay on the Loire valley.", 610, 0, 7);
  static final Flow VICTIM = new Flow("Victim's long document, summarise it: " + "lorem ipsum ".repeat(40), 450, 384, 12);
  static final Flow ATTACKER = new Flow("hi", 3, 0, 2);

  private static RedisServer redis;
  /** The replica the context legs pass and the one the generation legs pass (one service with memory). */
  private ServiceUnderTest contexts;
  private ServiceUnderTest generations;

  @BeforeAll
  static void startRedis() throws Exception {
    RedisServer.requireBinary();
    redis = RedisServer.start();
  }

  @AfterAll
  static void stopRedis() throws Exception {
    if (redis != null) {
      redis.close();
    }
  }

  @AfterEach
  void stop() throws Exception {
    if (generations != null && generations != contexts) {
      generations.close();
    }
    if (contexts != null) {
      contexts.close();
    }
    contexts = generations = null;
  }

  /** Every store × every key source. */
  static Stream<Arguments> matrix() {
    return Stream.of(StoreKind.values()).flatMap(store -> Stream.of(KeySource.values()).map(source -> Arguments.of(store, source)));
  }

  private void start(StoreKind store) throws Exception {
    start(store, Map.of());
  }

  private void start(StoreKind store, Map<String, String> extra) throws Exception {
    List<Setting> settings = new ArrayList<>();
    settings.add(new Setting("classification.context_clusters", ServiceUnderTest.CONTEXT_CLUSTER, "test"));
    settings.add(new Setting("classification.generation_clusters", ServiceUnderTest.GENERATION_CLUSTER, "test"));
    settings.add(new Setting("ordering.context_wait", "1500ms", "test"));
    if (store == StoreKind.REDIS) {
      settings.add(new Setting("store.type", "redis", "test"));
      settings.add(new Setting("store.redis_uri", redis.uri(), "test"));
      settings.add(new Setting("store.key_prefix", RedisStores.freshPrefix(), "test"));
      // Binding, not Redis latency, is under test: a loaded machine must not turn a slow reply into "error".
      settings.add(new Setting("store.redis_timeout", "1s", "test"));
    }
    extra.forEach((k, v) -> settings.add(new Setting(k, v, "test")));
    Config config = ConfigLoader.load(null, Map.of(), settings);
    if (store == StoreKind.MEMORY) {
      contexts = generations = new ServiceUnderTest(config);
    } else {
      contexts = RedisReplicasScenarioTest.replica(config);
      generations = RedisReplicasScenarioTest.replica(config);
    }
  }

  private ExchangeResult context(KeySource source, String key, Flow flow) {
    ExchangeResult r = Flows.run(contexts.envoy, flow.context(source, key));
    assertClean(r); // its outcome (stored) is counted when the write lands, after the exchange
    return r;
  }

  private ExchangeResult generation(KeySource source, String key, Flow flow) throws Exception {
    ExchangeResult r = Flows.run(generations.envoy, flow.generation(source, key, false));
    assertOwnNumbers(r, flow);
    return r;
  }

  static void assertOwnNumbers(ExchangeResult r, Flow flow) throws Exception {
    assertClean(r);
    assertThat(outcome(r)).as("outcome of %s", flow.prompt()).isEqualTo("rewritten");
    assertThat(r.accessLog("%DYNAMIC_METADATA(disagg_usage:prompt_tokens)%")).isEqualTo(Long.toString(flow.promptTokens()));
    assertThat(r.accessLog("%DYNAMIC_METADATA(disagg_usage:cached_tokens)%")).isEqualTo(Long.toString(flow.cachedTokens()));
    String body = r.clientResponse().bodyUtf8();
    List<ClientUsage> seen =
        body.startsWith("data:") ? OpenAiClientView.chatStreamUsages(body) : List.of(OpenAiClientView.chatCompletion(body));
    assertThat(seen).as("what the client reads").containsExactly(flow.truth());
  }

  static String outcome(ExchangeResult r) {
    return r.accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%");
  }

  /** Both flows' context legs under one key, then both generation legs: each reads its own numbers. */
  private void bothContextsThenBothGenerations(StoreKind store, KeySource source, Flow first, Flow second) throws Exception {
    start(store);
    String key = source.key();
    context(source, key, first);
    context(source, key, second);
    generation(source, key, first);
    generation(source, key, second);
  }

  @ParameterizedTest(name = "{0} store, key from {1}")
  @MethodSource("matrix")
  void twoFlowsSharingAKeyEachGetTheirOwnNumbers(StoreKind store, KeySource source) throws Exception {
    bothContextsThenBothGenerations(store, source, TENANT_A, TENANT_B);
    assertThat(generations.metrics.exchangeCount(Phase.GENERATION, Outcome.FINGERPRINT_MISMATCH)).isZero();
  }

  /** B's context is stored while A's generation waits for A's: B's neither satisfies nor ends the wait. */
  @ParameterizedTest(name = "{0} store, key from {1}")
  @MethodSource("matrix")
  void aWaitingGenerationIsNotSatisfiedByAnotherFlowsContext(StoreKind store, KeySource source) throws Exception {
    start(store);
    String key = source.key();
    context(source, key, TENANT_B);
    ExchangeResult[] a =
        Flows.generationFirst(
            contexts.envoy, TENANT_A.context(source, key), generations.envoy, TENANT_A.generation(source, key, true));
    assertClean(a[0]);
    assertOwnNumbers(a[1], TENANT_A);
    assertOwnNumbers(Flows.run(generations.envoy, TENANT_B.generation(source, key, true)), TENANT_B);
  }

  /**
   * An edge that forgot to strip {@code x-disagg-*} (or any source a client could set): the attacker's
   * tiny context leg under the victim's key is stored beside the victim's, and each generation takes
   * its own.
   */
  @ParameterizedTest(name = "{0} store, key from {1}")
  @MethodSource("matrix")
  void aForgedContextLegMovesNothing(StoreKind store, KeySource source) throws Exception {
    bothContextsThenBothGenerations(store, source, VICTIM, ATTACKER);
  }

  @ParameterizedTest(name = "{0} store, key from {1}")
  @MethodSource("matrix")
  void sixteenConcurrentFlowsOnOneKeyEachGetTheirOwnNumbers(StoreKind store, KeySource source) throws Exception {
    start(store);
    String key = source.key();
    List<Flow> flows = new ArrayList<>();
    for (int i = 0; i < 16; i++) {
      flows.add(new Flow("flow " + i + ": " + "tell me more ".repeat(i), 100 + 37L * i, 16L * (i % 5), 3 + i));
    }
    ExecutorService pool = Executors.newFixedThreadPool(16);
    try {
      List<Future<ExchangeResult[]>> results = new ArrayList<>();
      for (Flow f : flows) {
        // Half context first, half generation first: every interleaving of stores and waits.
        boolean waits = flows.indexOf(f) % 2 == 1;
        results.add(pool.submit(() -> waits
            ? Flows.generationFirst(contexts.envoy, f.context(source, key), generations.envoy, f.generation(source, key, true))
            : new ExchangeResult[] {
              Flows.run(contexts.envoy, f.context(source, key)), Flows.run(generations.envoy, f.generation(source, key, false))
            }));
      }
      for (int i = 0; i < flows.size(); i++) {
        ExchangeResult[] r = results.get(i).get();
        assertClean(r[0]);
        assertOwnNumbers(r[1], flows.get(i));
      }
    } finally {
      pool.shutdownNow();
    }
    assertThat(generations.metrics.exchangeCount(Phase.GENERATION, Outcome.REWRITTEN)).isEqualTo(16);
  }
}
