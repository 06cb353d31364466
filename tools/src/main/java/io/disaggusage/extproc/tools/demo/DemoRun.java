package io.disaggusage.extproc.tools.demo;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.tools.ClientUsage;
import io.disaggusage.extproc.tools.LocalService;
import io.disaggusage.extproc.emulator.engines.ClientRequest;
import io.disaggusage.extproc.emulator.engines.DisaggEngine;
import io.disaggusage.extproc.emulator.engines.PrefixCache;
import io.disaggusage.extproc.emulator.engines.ScheduleOrder;
import io.disaggusage.extproc.emulator.engines.TrtLlmEngine;
import io.disaggusage.extproc.emulator.engines.VllmEngine;
import io.disaggusage.extproc.emulator.engines.WordTokenizer.Message;
import io.disaggusage.extproc.emulator.engines.WorkerCall;
import io.disaggusage.extproc.emulator.engines.WorkerReply;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.DisaggFlows;
import io.disaggusage.extproc.emulator.envoy.EnvoyProfile;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.emulator.envoy.FakeEnvoy;
import io.disaggusage.extproc.driver.FilterConfigs;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The demo: simulated TensorRT-LLM and vLLM deployments send their worker calls through the fake Envoy
 * to the service running in this process; each scenario sends a cache-busted prompt, then the same
 * prompt again, and every request's usage is read as the client would read it, without and with the
 * service.
 */
public final class DemoRun {
  public static final String MODEL = "meta-llama/Llama-3.1-8B-Instruct";
  static final int MAX_TOKENS = 64;
  private static final int CACHE_BLOCKS = 4096;
  private static final String DOCUMENT =
      "Our platform serves large language models with prefill and decode disaggregation. A router sends"
          + " each request to a prefill worker, which computes the key-value cache of the prompt and the"
          + " first token, and then to a decode worker, which receives that cache over the network and"
          + " generates the rest of the answer. Customers are billed per token, and cached prompt tokens"
          + " are billed at a lower rate. The finance team noticed that almost every request is reported"
          + " as a full cache hit.";
  private static final String QUESTION = "Why would every request look like a cache hit?";

  /**
   * What the demo did.
   *
   * @param servicePort the loopback port the service listened on
   * @param messageTimeout the fake Envoy's {@code message_timeout}
   */
  public record Report(List<DemoRow> rows, int servicePort, Duration messageTimeout) {
    public Report {
      rows = List.copyOf(rows);
    }
  }

  private DemoRun() {}

  /** Runs every scenario with the service's default configuration and the shipped filter settings. */
  public static Report run(Duration messageTimeout) throws IOException {
    Config config = Config.defaults();
    String namespace = config.metadata().namespace();
    try (LocalService service = LocalService.start(config);
        FakeEnvoy envoy =
            FakeEnvoy.builder(service.channel())
                .config(FilterConfigs.withMessageTimeout(FilterConfigs.shipped(namespace), messageTimeout))
                .profile(EnvoyProfile.V1_37)
                .build()) {
      List<DemoScenario> scenarios = scenarios();
      // A first pass through the fake Envoy and the gRPC client, not shown, so the shown exchanges run
      // warm. Its prompts share no block with the shown ones, and its ids are the engines' first ones.
      for (DemoScenario scenario : scenarios) {
        send(envoy, scenario, request("warm-up", scenario.stream()));
      }
      List<DemoRow> rows = new ArrayList<>();
      for (int i = 0; i < scenarios.size(); i++) {
        DemoScenario scenario = scenarios.get(i);
        ClientRequest request = request(Integer.toString(7301 + 97 * i), scenario.stream());
        for (int repeat = 1; repeat <= 2; repeat++) {
          rows.add(row(scenario, repeat, namespace, send(envoy, scenario, request)));
        }
      }
      return new Report(rows, service.port(), messageTimeout);
    }
  }

  /** Every family in every format and order its orchestrators use, with fresh (empty) caches. */
  static List<DemoScenario> scenarios() {
    List<DemoScenario> scenarios = new ArrayList<>();
    for (DisaggEngine engine :
        List.of(
            new TrtLlmEngine(new PrefixCache(PrefixCache.DEFAULT_BLOCK_TOKENS, CACHE_BLOCKS)),
            new VllmEngine(new PrefixCache(PrefixCache.DEFAULT_BLOCK_TOKENS, CACHE_BLOCKS)))) {
      for (ScheduleOrder order : engine.orders()) {
        scenarios.add(new DemoScenario(engine, false, order));
        scenarios.add(new DemoScenario(engine, true, order));
      }
    }
    return scenarios;
  }

  /** A chat request whose system prompt starts with {@code nonce}, so no earlier prompt shares a block with it. */
  static ClientRequest request(String nonce, boolean stream) {
    return new ClientRequest(
        MODEL,
        List.of(
            new Message("system", "[cache-buster " + nonce + "] You are a concise assistant for an LLM platform team."),
            new Message("user", DOCUMENT + " " + QUESTION)),
        MAX_TOKENS,
        stream);
  }

  /** The orchestrator's two calls, answered by the simulated workers and passed through Envoy. */
  private record Sent(WorkerReply context, WorkerReply generation, ExchangeResult[] results) {}

  private static Sent send(FakeEnvoy envoy, DemoScenario scenario, ClientRequest request) {
    DisaggEngine engine = scenario.engine();
    ScheduleOrder order = scenario.order();
    WorkerCall contextCall = engine.contextCall(request, order);
    WorkerReply context = engine.context(contextCall);
    WorkerCall generationCall = engine.generationCall(request, order, contextCall, context);
    WorkerReply generation = engine.generation(generationCall);
    Exchange.Builder ctx = exchange("context", contextCall, context);
    Exchange.Builder gen = exchange("generation", generationCall, generation);
    ExchangeResult[] results =
        order == ScheduleOrder.CONTEXT_FIRST
            ? DisaggFlows.contextFirst(envoy, ctx, gen)
            : DisaggFlows.generationFirst(envoy, ctx, gen);
    return new Sent(context, generation, results);
  }

  /**
   * A worker call and its reply as one exchange through Envoy: JSON replies with a content-length in one
   * piece, event streams chunked, one event per chunk, as the engines' HTTP servers write them.
   */
  private static Exchange.Builder exchange(String name, WorkerCall call, WorkerReply reply) {
    Exchange.Builder b = Exchange.builder().name(name).method("POST").path(call.path());
    call.headers().forEach(b::requestHeader);
    b.requestBody(call.body()).requestContentLength();
    b.responseStatus(reply.status()).responseHeader("content-type", reply.contentType()).responseBody(reply.body());
    if (reply.contentType().startsWith("text/event-stream")) {
      b.responseChunking(Chunking.sseEvents());
    } else {
      b.responseContentLength();
    }
    return b;
  }

  private static DemoRow row(DemoScenario scenario, int repeat, String namespace, Sent sent) {
    ClientUsage none = new ClientUsage(-1, -1, -1, -1);
    ClientUsage without = ClientUsage.read(sent.generation().body()).orElse(none);
    ExchangeResult generation = sent.results()[1];
    ClientUsage with = ClientUsage.read(generation.clientResponse().body()).orElse(none);
    List<String> problems = new ArrayList<>();
    sent.results()[0].problems().forEach(p -> problems.add("context exchange: " + p));
    generation.problems().forEach(p -> problems.add("generation exchange: " + p));
    return new DemoRow(
        scenario.label(),
        repeat,
        sent.context().truth().prompt(),
        without.cached(),
        with.cached(),
        sent.context().truth().cached(),
        with.completion(),
        with.total(),
        generation.accessLog("%DYNAMIC_METADATA(" + namespace + ":outcome)%"),
        problems);
  }
}
