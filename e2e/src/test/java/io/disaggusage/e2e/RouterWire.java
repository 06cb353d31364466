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

  /**
   * SMG's SGLang mode: the same body to both legs (the client's, re-serialised with {@code logprobs: false}
   * added and {@code max_tokens} kept), with {@code bootstrap_host} the prefill pod (its {@code --prefill} URL's
   * host), the prefill's {@code bootstrap_port} and a {@code bootstrap_room} per request; no
   * {@code X-Request-Id} of its own, so each leg carries the one its Envoy generated, and the two differ.
   */
  static void assertSmgSglang(RouterDeployment deployment) {
    List<RecordedRequest> prefills = deployment.prefill.log().completions();
    List<RecordedRequest> decodes = deployment.decode.log().completions();
    assertThat(bodies(prefills)).as("the same body on both legs").isEqualTo(bodies(decodes));
    int bootstrapPort = deployment.prefill.bootstrapPort().orElseThrow();
    for (RecordedRequest request : decodes) {
      JsonNode body = RouterClients.parseJson(request.bodyUtf8());
      assertThat(body.path("bootstrap_host").asText()).isEqualTo(RouterDeployment.PREFILL_POD);
      assertThat(body.path("bootstrap_port").asInt()).isEqualTo(bootstrapPort);
      assertThat(body.path("bootstrap_room").isIntegralNumber()).as(request.bodyUtf8()).isTrue();
      assertThat(body.has("max_tokens")).as(request.bodyUtf8()).isTrue();
      assertThat(body.has("max_completion_tokens")).as(request.bodyUtf8()).isFalse();
      assertThat(body.path("logprobs").isBoolean()).as(request.bodyUtf8()).isTrue();
    }
    for (Legs flow : legs(deployment.prefill, deployment.decode, RouterWire::bootstrapRoom)) {
      assertEnvoysOwnIds(flow);
    }
  }

  /**
   * SMG's vLLM NIXL mode, in sequence: the prefill leg asks for one token without streaming and carries exactly
   * {@code kv_transfer_params {do_remote_decode: true, do_remote_prefill: false}}; the decode leg carries the
   * {@code kv_transfer_params} the prefill returned, whose {@code remote_request_id} names the prefill leg's
   * {@code X-Request-Id} (vLLM's {@code chatcmpl-<id>-<8 hex>}); no id of SMG's own on either leg.
   */
  static void assertSmgNixl(RouterDeployment deployment) {
    List<Legs> legs = legs(deployment.prefill, deployment.decode, RouterWire::nixlTransfer);
    assertThat(legs).hasSameSizeAs(deployment.decode.log().completions());
    for (Legs flow : legs) {
      assertCappedPrefill(flow.prefill());
      JsonNode prefillParams = RouterClients.parseJson(flow.prefill().bodyUtf8()).path("kv_transfer_params");
      assertThat(prefillParams.toString()).isEqualTo("{\"do_remote_decode\":true,\"do_remote_prefill\":false}");
      JsonNode params = RouterClients.parseJson(flow.decode().bodyUtf8()).path("kv_transfer_params");
      assertThat(params.path("do_remote_prefill").asBoolean()).as(flow.decode().bodyUtf8()).isTrue();
      assertThat(params.path("remote_request_id").asText())
          .matches("chatcmpl-" + java.util.regex.Pattern.quote(flow.requestIds().get(0)) + "-[0-9a-f]{8}");
      assertThat(params.path("remote_engine_id").asText()).isNotEmpty();
      assertEnvoysOwnIds(flow);
    }
  }

  /**
   * SMG's vLLM Mooncake mode, in sequence: parameters SMG minted, one {@code transfer_id} per flow on both legs —
   * the prefill's {@code {do_remote_decode: true, do_remote_prefill: false, transfer_id}}, the decode's
   * {@code {do_remote_decode: false, do_remote_prefill: true, transfer_id, remote_engine_id, remote_bootstrap_addr}}
   * with the prefill's registered engine id and its URL's host at the default bootstrap port 8998; what the
   * prefill returned is not relayed.
   */
  static void assertSmgMooncake(RouterDeployment deployment) {
    List<Legs> legs = legs(deployment.prefill, deployment.decode, RouterWire::transferId);
    assertThat(legs).hasSameSizeAs(deployment.decode.log().completions());
    String bootstrap = "http://" + java.net.URI.create(deployment.prefillUrl).getHost() + ":8998";
    for (Legs flow : legs) {
      assertCappedPrefill(flow.prefill());
      String id = transferId(flow.prefill()).toString();
      assertThat(id).matches("xfer-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");
      assertThat(RouterClients.parseJson(flow.prefill().bodyUtf8()).path("kv_transfer_params").toString())
          .isEqualTo("{\"do_remote_decode\":true,\"do_remote_prefill\":false,\"transfer_id\":\"" + id + "\"}");
      assertThat(RouterClients.parseJson(flow.decode().bodyUtf8()).path("kv_transfer_params").toString())
          .isEqualTo("{\"do_remote_decode\":false,\"do_remote_prefill\":true,\"transfer_id\":\"" + id
              + "\",\"remote_engine_id\":\"" + RouterKind.SMG_MOONCAKE_PREFILL_ENGINE + "\",\"remote_bootstrap_addr\":\""
              + bootstrap + "\"}");
      assertEnvoysOwnIds(flow);
    }
    assertThat(legs.stream().map(flow -> transferId(flow.prefill())).distinct()).as("a transfer_id per flow").hasSameSizeAs(legs);
  }

  /**
   * SMG's connector-less vLLM mode, in sequence: the prefill leg gets the client's body capped to one token, not
   * streamed, the decode leg the client's body; neither carries {@code kv_transfer_params} or an id of SMG's: the
   * legs share nothing but the prompt.
   */
  static void assertSmgVllm(RouterDeployment deployment) {
    List<RecordedRequest> prefills = deployment.prefill.log().completions();
    List<RecordedRequest> decodes = deployment.decode.log().completions();
    assertThat(prefills).hasSameSizeAs(decodes);
    for (int i = 0; i < prefills.size(); i++) {
      assertCappedPrefill(prefills.get(i));
      for (RecordedRequest leg : List.of(prefills.get(i), decodes.get(i))) {
        assertThat(RouterClients.parseJson(leg.bodyUtf8()).has("kv_transfer_params")).as(leg.bodyUtf8()).isFalse();
      }
      assertEnvoysOwnIds(new Legs(prefills.get(i), decodes.get(i)));
    }
  }

  /** SMG's vLLM NIXL flow: a prefill leg's {@code X-Request-Id}, the one a decode leg's {@code remote_request_id} names. */
  static Object nixlTransfer(RecordedRequest request) {
    String remote = RouterClients.parseJson(request.bodyUtf8()).path("kv_transfer_params").path("remote_request_id").asText("");
    java.util.regex.Matcher named = java.util.regex.Pattern.compile("chatcmpl-(.*)-[0-9a-f]{8}").matcher(remote);
    return named.matches() ? named.group(1) : request.headerValues("x-request-id").stream().findFirst().orElse("");
  }

  /** SMG's vLLM Mooncake flow: the {@code transfer_id} it minted for both legs. */
  static Object transferId(RecordedRequest request) {
    return RouterClients.parseJson(request.bodyUtf8()).path("kv_transfer_params").path("transfer_id").asText("");
  }

  /** SMG's vLLM prefill leg: one token ({@code max_tokens}, or {@code max_completion_tokens} when the client used it), not streamed. */
  private static void assertCappedPrefill(RecordedRequest prefill) {
    JsonNode body = RouterClients.parseJson(prefill.bodyUtf8());
    JsonNode cap = body.has("max_completion_tokens") ? body.path("max_completion_tokens") : body.path("max_tokens");
    assertThat(cap.asInt()).as(prefill.bodyUtf8()).isEqualTo(1);
    assertThat(body.path("stream").asBoolean(true)).as(prefill.bodyUtf8()).isFalse();
    assertThat(body.has("stream_options")).as(prefill.bodyUtf8()).isFalse();
  }

  /** SMG sends no {@code X-Request-Id} of its own: each leg has the one its Envoy generated, and they differ. */
  private static void assertEnvoysOwnIds(Legs flow) {
    assertThat(flow.prefill().headerValues("x-request-id")).as("the prefill leg's").hasSize(1);
    assertThat(flow.decode().headerValues("x-request-id")).as("the decode leg's").hasSize(1)
        .doesNotContainAnyElementsOf(flow.prefill().headerValues("x-request-id"));
  }

  private static Set<String> bodies(List<RecordedRequest> requests) {
    return requests.stream().map(RecordedRequest::bodyUtf8).collect(Collectors.toSet());
  }
}
