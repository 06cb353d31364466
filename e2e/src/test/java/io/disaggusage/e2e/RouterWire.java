package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.disaggusage.extproc.classify.PromptFingerprint;
import io.disaggusage.extproc.classify.PromptFingerprints;
import io.disaggusage.extproc.emulator.workers.EngineWorker;
import io.disaggusage.extproc.emulator.workers.RecordedRequest;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import java.util.stream.Collectors;

/** What each router put on the wire to the workers, as the workers recorded it behind Envoy. */
final class RouterWire {
  /** One exchange's two legs, as the prefill and the decode worker recorded them. */
  record Legs(RecordedRequest prefill, RecordedRequest decode) {
    /** The prefill leg's {@code X-Request-Id} values. */
    List<String> requestIds() {
      return prefill.headerValues("x-request-id");
    }
  }

  private RouterWire() {}

  /**
   * Every chat completion leg {@code prefill} received, with the one decode leg whose {@code flow} (what
   * the router names both legs of one exchange by: an {@code X-Request-Id}, a {@code bootstrap_room}) is
   * the same.
   */
  static List<Legs> legs(EngineWorker prefill, EngineWorker decode, Function<RecordedRequest, Object> flow) {
    List<RecordedRequest> decodes = decode.log().completions();
    List<Legs> legs = new ArrayList<>();
    for (RecordedRequest p : prefill.log().completions()) {
      Object id = flow.apply(p);
      List<RecordedRequest> matches = decodes.stream().filter(d -> flow.apply(d).equals(id)).toList();
      assertThat(matches).as("the one decode leg of the prefill leg's flow " + id).hasSize(1);
      legs.add(new Legs(p, matches.get(0)));
    }
    return legs;
  }

  /** vllm-router's and pd-sidecar's flow: the request's {@code X-Request-Id} values. */
  static Object requestIds(RecordedRequest request) {
    return request.headerValues("x-request-id");
  }

  /** SGLang's flow: the body's {@code bootstrap_room}. */
  static Object bootstrapRoom(RecordedRequest request) {
    return RouterClients.parseJson(request.bodyUtf8()).path("bootstrap_room").asText();
  }

  /**
   * The service binds a context usage to (key, prompt fingerprint): on the real wire, both legs of each
   * flow must have one fingerprint, the one of the body its client sent; clients with different prompts
   * never share one. Each client body accounts for one flow.
   */
  static void assertLegsShareTheirClientsFingerprint(List<Legs> legs, List<String> clientBodies) {
    Map<PromptFingerprint, Long> sent = new HashMap<>();
    for (String body : clientBodies) {
      PromptFingerprint fingerprint = fingerprint(body.getBytes(StandardCharsets.UTF_8));
      assertThat(fingerprint).as(body).isNotNull();
      sent.merge(fingerprint, 1L, Long::sum);
    }
    assertThat(sent).as("one fingerprint per distinct prompt")
        .hasSize((int) clientBodies.stream().map(b -> RouterClients.parseJson(b).path("messages")).distinct().count());
    Map<PromptFingerprint, Long> seen = new HashMap<>();
    for (Legs flow : legs) {
      PromptFingerprint prefill = fingerprint(flow.prefill().body());
      assertThat(prefill).as(flow.prefill().bodyUtf8()).isNotNull();
      assertThat(fingerprint(flow.decode().body())).as("the decode leg of " + flow.prefill().bodyUtf8()).isEqualTo(prefill);
      seen.merge(prefill, 1L, Long::sum);
    }
    assertThat(seen).as("each flow's legs have its client's fingerprint").isEqualTo(sent);
  }

  private static PromptFingerprint fingerprint(byte[] body) {
    return PromptFingerprints.of(body, false);
  }

  /**
   * sglang-router: the same body to both legs, with {@code bootstrap_host} the prefill pod, a
   * {@code bootstrap_room} per request, and the client's {@code max_tokens} renamed
   * {@code max_completion_tokens}.
   */
  static void assertSglang(RouterDeployment deployment) {
    List<RecordedRequest> prefills = deployment.prefill.log().completions();
    List<RecordedRequest> decodes = deployment.decode.log().completions();
    assertThat(bodies(prefills)).as("the same body on both legs").isEqualTo(bodies(decodes));
    for (RecordedRequest request : decodes) {
      JsonNode body = RouterClients.parseJson(request.bodyUtf8());
      assertThat(body.path("bootstrap_host").asText()).isEqualTo(RouterDeployment.PREFILL_POD);
      assertThat(body.has("bootstrap_room")).isTrue();
      assertThat(body.has("max_tokens")).as(request.bodyUtf8()).isFalse();
      assertThat(body.has("max_completion_tokens")).as(request.bodyUtf8()).isTrue();
    }
  }

  /**
   * vllm-router: sequential legs under one {@code X-Request-Id} naming both workers; the prefill leg
   * asks for one token without streaming and announces a remote decode, the decode leg carries the
   * prefill's {@code kv_transfer_params}.
   */
  static void assertVllm(RouterDeployment deployment) {
    List<RecordedRequest> prefills = deployment.prefill.log().completions();
    List<RecordedRequest> decodes = deployment.decode.log().completions();
    assertThat(prefills).hasSameSizeAs(decodes);
    for (int i = 0; i < prefills.size(); i++) {
      JsonNode prefill = RouterClients.parseJson(prefills.get(i).bodyUtf8());
      JsonNode decode = RouterClients.parseJson(decodes.get(i).bodyUtf8());
      assertThat(prefill.path("max_tokens").asInt()).isEqualTo(1);
      assertThat(prefill.path("stream").asBoolean(true)).isFalse();
      assertThat(prefill.path("kv_transfer_params").path("do_remote_decode").asBoolean()).isTrue();
      assertThat(decode.path("kv_transfer_params").isObject()).as(decodes.get(i).bodyUtf8()).isTrue();
      List<String> id = prefills.get(i).headerValues("x-request-id");
      assertThat(id).singleElement().satisfies(v -> assertThat(v).startsWith("___prefill_addr_"));
      assertThat(decodes.get(i).headerValues("x-request-id")).isEqualTo(id);
    }
  }

  private static Set<String> bodies(List<RecordedRequest> requests) {
    return requests.stream().map(RecordedRequest::bodyUtf8).collect(Collectors.toSet());
  }
}
