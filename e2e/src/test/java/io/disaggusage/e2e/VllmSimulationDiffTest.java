package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.e2e.RealVllmTest.Shape;
import io.disaggusage.e2e.RecordingHop.Exchange;
import io.disaggusage.extproc.emulator.engines.UsageVariant;
import io.disaggusage.extproc.emulator.workers.EngineKind;
import io.disaggusage.extproc.emulator.workers.EngineWorker;
import io.disaggusage.extproc.emulator.workers.WorkerRole;
import io.disaggusage.extproc.emulator.workers.WorkerSpec;
import io.disaggusage.e2e.Orchestrator.Answer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.UnaryOperator;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The simulated vLLM workers (the emulator's, which {@code workers}, the sandbox, the demo and the router
 * tests run) against the real vLLM 0.32 pair ({@link RealVllmPair}): the same request through the same
 * toy proxy to each, and everything compared but what must differ (ids, text, counts, timings) —
 * every key of both legs' answers in its order, types and nulls ({@link WireShape}), the SSE framing and
 * its events down to the final usage chunk, the prefill's {@code kv_transfer_params} and the decode's,
 * the content types, and the response ids derived from {@code X-Request-Id}. The simulation follows the
 * real engine; where they differ the simulation is wrong.
 */
class VllmSimulationDiffTest {
  private static final List<AutoCloseable> STARTED = new ArrayList<>();
  private static Side real;
  private static Side simulated;

  /** One pair of workers behind recording hops and a toy proxy. */
  record Side(String name, RecordingHop prefill, RecordingHop decode, ProxyOrchestrator proxy) {
    static Side of(String name, String prefillUrl, String decodeUrl) {
      RecordingHop prefill = started(new RecordingHop(prefillUrl));
      RecordingHop decode = started(new RecordingHop(decodeUrl));
      UnaryOperator<String> toPrefill = path -> "http://127.0.0.1:" + prefill.port() + path;
      UnaryOperator<String> toDecode = path -> "http://127.0.0.1:" + decode.port() + path;
      return new Side(name, prefill, decode, started(new ProxyOrchestrator(toPrefill, toDecode, UnaryOperator.identity())));
    }

    /** One flow: the client's answer and both legs as the workers answered them. */
    Legs flow(Shape shape, String body) {
      Answer answer = Orchestrator.postAndWait(proxy.baseUrl() + shape.path, Map.of(), body.getBytes(StandardCharsets.UTF_8));
      assertThat(answer.status()).as("%s: %s", name, answer.text()).isEqualTo(200);
      String requestId = proxy.requestIds().get(proxy.requestIds().size() - 1);
      return new Legs(requestId, prefill.only(shape.path, requestId), decode.only(shape.path, requestId));
    }
  }

  record Legs(String requestId, Exchange prefill, Exchange decode) {}

  @BeforeAll
  static void start() throws Exception {
    RealVllmPair pair = RealVllmPair.get();
    real = Side.of("real vLLM 0.32", pair.prefill.url(""), pair.decode.url(""));
    EngineWorker prefill = started(EngineWorker.start(
        WorkerSpec.of(EngineKind.VLLM, WorkerRole.PREFILL, "127.0.0.1", 0).withModel(RealVllmPair.MODEL)
            .withVariant(UsageVariant.FIXED))); // vLLM 0.32 has #54222

    EngineWorker decode = started(EngineWorker.start(WorkerSpec.of(EngineKind.VLLM, WorkerRole.DECODE, "127.0.0.1", 0)
        .withModel(RealVllmPair.MODEL).withVariant(UsageVariant.FIXED)));
    simulated = Side.of("simulated", base(prefill), base(decode));
  }

  @AfterAll
  static void stop() {
    RouterDeployment.closeAll(STARTED);
  }

  @ParameterizedTest(name = "{0}: the simulated legs are shaped like the real engine's")
  @EnumSource(value = Shape.class, names = {"CHAT_JSON", "CHAT_SSE", "CHAT_SSE_CONTINUOUS"})
  void simulatedLegsAreShapedLikeTheRealOnes(Shape shape) {
    ObjectNode request = (ObjectNode) RouterClients.parseJson(shape.body(RealVllmTest.freshPrompt(), 6));
    request.put("ignore_eos", true); // the tiny model's random weights may end early; the simulation never does
    Legs r = real.flow(shape, request.toString());
    Legs s = simulated.flow(shape, request.toString());

    SoftAssertions soft = new SoftAssertions();
    soft.assertThat(s.prefill().status()).isEqualTo(r.prefill().status()).isEqualTo(200);
    soft.assertThat(s.prefill().contentType()).as("prefill content type").isEqualTo(r.prefill().contentType());
    JsonNode rp = RouterClients.parseJson(r.prefill().responseText());
    JsonNode sp = RouterClients.parseJson(s.prefill().responseText());
    soft.assertThat(WireShape.of(sp)).as("the prefill's answer; real: %s", r.prefill().responseText()).isEqualTo(WireShape.of(rp));
    soft.assertThat(WireShape.of(sp.path("kv_transfer_params"))).as("the prefill's kv_transfer_params")
        .isEqualTo(WireShape.of(rp.path("kv_transfer_params")));
    soft.assertThat(idTemplate(sp.path("id").asText(), s.requestId())).as("the prefill's response id")
        .isEqualTo(idTemplate(rp.path("id").asText(), r.requestId()));
    soft.assertThat(idTemplate(sp.path("kv_transfer_params").path("remote_request_id").asText(), s.requestId()))
        .as("the prefill's remote_request_id").isEqualTo(idTemplate(rp.path("kv_transfer_params").path("remote_request_id").asText(), r.requestId()));

    soft.assertThat(s.decode().status()).isEqualTo(r.decode().status()).isEqualTo(200);
    soft.assertThat(s.decode().contentType()).as("decode content type").isEqualTo(r.decode().contentType());
    if (shape.stream) {
      soft.assertThat(WireShape.events(s.decode().responseText())).as("the decode's events; real: %s", r.decode().responseText())
          .isEqualTo(WireShape.events(r.decode().responseText()));
    } else {
      soft.assertThat(WireShape.of(RouterClients.parseJson(s.decode().responseText())))
          .as("the decode's answer; real: %s", r.decode().responseText())
          .isEqualTo(WireShape.of(RouterClients.parseJson(r.decode().responseText())));
    }
    soft.assertThat(ids(s.decode().responseText(), shape.stream, s.requestId())).as("the decode's response ids")
        .isEqualTo(ids(r.decode().responseText(), shape.stream, r.requestId()));
    soft.assertAll();
  }

  /** {@code id} with the flow's {@code X-Request-Id} and any other run of hex digits named, not spelled. */
  static String idTemplate(String id, String requestId) {
    return id.replace(requestId, "<X-Request-Id>").replaceAll("[0-9a-f]{8,}", "<hex>");
  }

  /** The distinct id templates of a decode answer's body or events. */
  private static List<String> ids(String body, boolean stream, String requestId) {
    List<String> ids = new ArrayList<>();
    for (String data : stream ? WireShape.data(body) : List.of(body)) {
      String id = idTemplate(RouterClients.parseJson(data).path("id").asText(), requestId);
      if (!ids.contains(id)) {
        ids.add(id);
      }
    }
    return ids;
  }

  private static String base(EngineWorker worker) {
    return "http://127.0.0.1:" + worker.port();
  }

  private static <T extends AutoCloseable> T started(T child) {
    STARTED.add(0, child);
    return child;
  }
}
