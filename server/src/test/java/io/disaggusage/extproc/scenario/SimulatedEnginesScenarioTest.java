package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.OutsideUsage;
import io.disaggusage.extproc.testkit.OpenAiClientView;
import io.disaggusage.extproc.testkit.Wire;
import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.testkit.OpenAiClientView.ClientUsage;
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
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The demo's simulated engines through the scenario fixture: their bodies are what the official OpenAI
 * SDK reads, the service corrects them under any chunking and in both orders, and the corrected counts
 * are the context worker's prefix-cache truth, on a cold prompt and on the same prompt again.
 */
class SimulatedEnginesScenarioTest extends ScenarioFixture {

  static Stream<Arguments> flows() {
    List<Function<PrefixCache, DisaggEngine>> families = List.of(TrtLlmEngine::new, VllmEngine::new);
    List<Arguments> out = new ArrayList<>();
    for (Function<PrefixCache, DisaggEngine> family : families) {
      for (ScheduleOrder order : family.apply(new PrefixCache(16, 16)).orders()) {
        for (boolean stream : new boolean[] {false, true}) {
          for (String chunking : List.of("events", "fixed-7", "random+empty")) {
            String name = family.apply(new PrefixCache(16, 16)).name() + " " + (stream ? "SSE" : "JSON") + " "
                + order.label() + " " + chunking;
            out.add(Arguments.of(name, family, order, stream, chunking));
          }
        }
      }
    }
    return out.stream();
  }

  private static Chunking chunking(String name) {
    return switch (name) {
      case "events" -> Chunking.sseEvents();
      case "fixed-7" -> Chunking.fixed(7);
      default -> Chunking.random(name.hashCode(), 60).withEmptyFinalChunk();
    };
  }

  private static Exchange.Builder exchange(WorkerCall call, WorkerReply reply, Chunking chunking) {
    return exchange(call, reply, chunking, call.headers().get("x-request-id"));
  }

  /** The call as Envoy forwards it, with {@code requestId} as its x-request-id (null: none). */
  private static Exchange.Builder exchange(WorkerCall call, WorkerReply reply, Chunking chunking, String requestId) {
    Exchange.Builder b = Exchange.post(call.path(), call.bodyUtf8());
    call.headers().forEach((k, v) -> {
      if (!k.equals("content-type") && !k.equals("x-request-id")) {
        b.requestHeader(k, v);
      }
    });
    if (requestId != null) {
      b.requestHeader("x-request-id", requestId);
    }
    return b.responseHeader("content-type", reply.contentType()).responseBody(reply.body()).responseChunking(chunking);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("flows")
  void theClientGetsTheContextWorkersTruthColdAndWarm(
      String name, Function<PrefixCache, DisaggEngine> family, ScheduleOrder order, boolean stream, String chunking)
      throws Exception {
    DisaggEngine engine = family.apply(new PrefixCache(16, 1024));
    ClientRequest request =
        new ClientRequest(Wire.MODEL, List.of(new Message("user", "What does a prefix cache reuse? ".repeat(12))), 20, stream);
    for (int repeat = 0; repeat < 2; repeat++) {
      WorkerCall ctxCall = engine.contextCall(request, order);
      WorkerReply ctx = engine.context(ctxCall);
      WorkerCall genCall = engine.generationCall(request, order, ctxCall, ctx);
      WorkerReply gen = engine.generation(genCall);
      Exchange.Builder c = exchange(ctxCall, ctx, Chunking.whole());
      Exchange.Builder g = exchange(genCall, gen, chunking(chunking));
      ExchangeResult[] r =
          order == ScheduleOrder.CONTEXT_FIRST
              ? Flows.contextFirst(service.envoy, c, g)
              : Flows.generationFirst(service.envoy, c, g);
      assertClean(r[0]);
      assertClean(r[1]);
      assertThat(r[0].clientResponse().body()).isEqualTo(ctx.body());
      String body = r[1].clientResponse().bodyUtf8();
      ClientUsage seen = stream ? OpenAiClientView.chatStream(body) : OpenAiClientView.chatCompletion(body);
      ClientUsage reported = stream ? OpenAiClientView.chatStream(gen.bodyUtf8()) : OpenAiClientView.chatCompletion(gen.bodyUtf8());
      long prompt = ctx.truth().prompt();
      assertThat(seen).isEqualTo(new ClientUsage(prompt, ctx.truth().cached(), 20, prompt + 20));
      assertThat(reported.cached()).isGreaterThanOrEqualTo(prompt - 1);
      assertThat(ctx.truth().cached()).isEqualTo(repeat == 0 ? 0 : (prompt - 1) / 16 * 16);
      // Nothing but the usage changed.
      assertThat(OutsideUsage.of(body)).isEqualTo(OutsideUsage.of(gen.bodyUtf8()));
    }
    assertThat(service.store.size()).isZero();
  }

  static Stream<Arguments> unsharedIds() {
    List<Arguments> out = new ArrayList<>();
    for (boolean stream : new boolean[] {false, true}) {
      for (String ids : List.of("each leg its own", "none")) {
        for (String chunking : List.of("events", "random+empty")) {
          out.add(Arguments.of((stream ? "SSE" : "JSON") + ", x-request-id: " + ids + ", " + chunking, stream, ids, chunking));
        }
      }
    }
    return out.stream();
  }

  /**
   * A router that shares no id (SMG; Envoy then gives each leg its own x-request-id, or a deployment
   * none at all): the decode request carries back the prefill response's {@code remote_request_id},
   * and that joins the legs.
   */
  @ParameterizedTest(name = "{0}")
  @MethodSource("unsharedIds")
  void vllmLegsThatShareNoIdJoinByTheirKvTransfer(String name, boolean stream, String ids, String chunking)
      throws Exception {
    DisaggEngine engine = new VllmEngine(new PrefixCache(16, 1024));
    ClientRequest request =
        new ClientRequest(Wire.MODEL, List.of(new Message("user", "Which leg holds the KV? ".repeat(9))), 20, stream);
    for (int repeat = 0; repeat < 2; repeat++) {
      WorkerCall ctxCall = engine.contextCall(request, ScheduleOrder.CONTEXT_FIRST);
      WorkerReply ctx = engine.context(ctxCall);
      WorkerCall genCall = engine.generationCall(request, ScheduleOrder.CONTEXT_FIRST, ctxCall, ctx);
      WorkerReply gen = engine.generation(genCall);
      boolean own = ids.equals("each leg its own");
      ExchangeResult[] r =
          Flows.contextFirst(
              service.envoy,
              exchange(ctxCall, ctx, Chunking.whole(), own ? "envoy-ctx-" + repeat : null),
              exchange(genCall, gen, chunking(chunking), own ? "envoy-gen-" + repeat : null));
      assertClean(r[0]);
      assertClean(r[1]);
      String body = r[1].clientResponse().bodyUtf8();
      ClientUsage seen = stream ? OpenAiClientView.chatStream(body) : OpenAiClientView.chatCompletion(body);
      long prompt = ctx.truth().prompt();
      assertThat(seen).isEqualTo(new ClientUsage(prompt, ctx.truth().cached(), 20, prompt + 20));
      assertThat(r[1].accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("rewritten");
      assertThat(OutsideUsage.of(body)).isEqualTo(OutsideUsage.of(gen.bodyUtf8()));
    }
    // Both aliases of each entry went with it: nothing is left behind under the context's own id.
    assertThat(service.store.size()).isZero();
  }
}
