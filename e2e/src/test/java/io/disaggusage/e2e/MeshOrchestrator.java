package io.disaggusage.e2e;

import io.disaggusage.e2e.Orchestrator.Answer;
import io.disaggusage.extproc.testkit.ScenarioVectors.Leg;
import io.disaggusage.extproc.testkit.ScenarioVectors.Vector;
import java.net.http.HttpClient;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * The orchestrator's side when its worker calls go through an Istio proxy (the orchestrator pod's sidecar, or a
 * gateway): every leg goes to the proxy's listener addressed by {@code Host} to the worker Service, as an
 * orchestrator calling {@code context-workers:8000} does in a pod. Each instance opens connections of its own, so
 * a case that changed the proxy's listener is not served by a connection the previous listener still drains.
 */
final class MeshOrchestrator {
  /** The vLLM P/D proxy's legs without any body marker: the phase can come only from the cluster's name. */
  static final String UNMARKED_PREFILL = unmarked(VllmFlow.PREFILL_REQUEST, ",\"kv_transfer_params\":{\"do_remote_decode\":true}");
  static final String UNMARKED_DECODE = unmarked(VllmFlow.DECODE_REQUEST, ",\"kv_transfer_params\":{\"do_remote_prefill\":true}");

  private final HttpClient client =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(5)).build();
  private final String listener;

  /** An orchestrator sending through the proxy listener at {@code http://ADDRESS:PORT}. */
  MeshOrchestrator(String listener) {
    this.listener = listener;
  }

  CompletableFuture<Answer> context(Leg leg) {
    return send(IstioStandalone.CONTEXT_HOST, leg.path(), leg.requestHeaders(), leg.requestBody());
  }

  CompletableFuture<Answer> generation(Leg leg) {
    return send(IstioStandalone.GENERATION_HOST, leg.path(), leg.requestHeaders(), leg.requestBody());
  }

  /** Both legs of a scenario vector in its order. */
  VectorFlow.Result run(Vector v) {
    return VectorFlow.send(this::context, this::generation, v);
  }

  /**
   * A vLLM P/D flow under the client's {@code requestId}: the prefill leg, then the decode leg, with the proxy's
   * body markers ({@code kv_transfer_params}) or without any ({@code marked} false); the decode answer.
   */
  Answer vllm(String requestId, boolean marked) {
    Map<String, String> headers = Map.of("x-request-id", requestId);
    Answer prefill = send(IstioStandalone.CONTEXT_HOST, "/v1/chat/completions", headers,
        bytes(marked ? VllmFlow.PREFILL_REQUEST : UNMARKED_PREFILL)).join();
    if (prefill.status() != 200) {
      throw new AssertionError("prefill leg answered " + prefill.status() + ": " + prefill.text());
    }
    return send(IstioStandalone.GENERATION_HOST, "/v1/chat/completions", headers,
        bytes(marked ? VllmFlow.DECODE_REQUEST : UNMARKED_DECODE)).join();
  }

  private CompletableFuture<Answer> send(String host, String path, Map<String, String> headers, byte[] body) {
    Map<String, String> all = new LinkedHashMap<>(headers);
    all.put("host", host);
    return Orchestrator.post(client, listener + path, all, body);
  }

  private static String unmarked(String body, String marker) {
    if (!body.contains(marker)) {
      throw new IllegalStateException("VllmFlow's request no longer carries " + marker);
    }
    return body.replace(marker, "");
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
