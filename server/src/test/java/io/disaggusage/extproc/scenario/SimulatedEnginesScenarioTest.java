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
    Exchange.Builder b = Exchange.post(call.path(), call.bodyUtf8());
    call.headers().forEach((k, v) -> {
      if (!k.equals("content-type")) {
        b.requestHeader(k, v);
      }
    });
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
}
