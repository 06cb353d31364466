package io.disaggusage.extproc.classify;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.testkit.ForgedMembers;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * One specification over every honest flow shape × every input a client can add that a router forwards to
 * both legs (behaviour.md §3, "Inputs a client can forge"): the client's headers and, where the router
 * passes them on, its body fields. Each leg's body goes through the reader the service uses ({@link
 * RequestBodyReader#forRequest}), so MessagePack sniffing is part of it. For every case, with the shipped
 * rules:
 *
 * <ul>
 *   <li>each leg keeps the phase and the keys of its honest twin, so the flow is corrected exactly as
 *       without the forgery;
 *   <li>no leg of a vLLM-family or SGLang flow carries a context usage (a client's {@code ctx_usage});
 *   <li>a forged input that names another phase, a conflicting marker, a {@code ctx_usage} or a
 *       MessagePack header on JSON shows as a {@linkplain Classification#refused() refused input} on at
 *       least one leg, so every attempt is counted.
 * </ul>
 */
class ForgedInputsSpecificationTest {
  private static final ExchangeClassifier SHIPPED =
      new ExchangeClassifier(
          ClassificationRules.of(
              List.of("prefill-pool"),
              List.of("decode-pool"),
              List.of("/v1/chat/completions", "/v1/completions"),
              256,
              false));

  private static final String PROMPT = "\"messages\":[{\"role\":\"user\",\"content\":\"count the sheep\"}]";

  /** One leg as the orchestrator sends it: its cluster, headers and body members. */
  record Leg(String cluster, Map<String, String> headers, String members) {}

  /**
   * An honest flow shape and whether its router passes a client's body fields on (TensorRT-LLM's server
   * builds {@code disaggregated_params} itself and refuses unknown fields).
   */
  record Flow(String name, Leg context, Leg generation, boolean forwardsBodyFields) {}

  /** A client's forgery: headers and body members added to both legs. */
  record Forgery(String name, Map<String, String> headers, String members) {
    boolean namesAPhase() {
      return headers.containsKey("x-disagg-phase") && !headers.get("x-disagg-phase").equals("junk")
          || members.contains("request_type");
    }
  }

  static List<Flow> flows() {
    Map<String, String> rid = Map.of("x-request-id", "req-1");
    return List.of(
        new Flow(
            "vLLM (toy proxy, vllm-router, llm-d coordinator and sidecar, SMG)",
            new Leg(null, rid, "\"kv_transfer_params\":{\"do_remote_decode\":true,\"do_remote_prefill\":false}"),
            new Leg(
                null,
                rid,
                "\"kv_transfer_params\":{\"do_remote_decode\":false,\"do_remote_prefill\":true,"
                    + "\"remote_engine_id\":\"e1\",\"remote_block_ids\":[1,2],\"remote_host\":\"10.0.0.1\","
                    + "\"remote_port\":5600,\"remote_request_id\":\"chatcmpl-req-1\"}"),
            true),
        new Flow(
            "vLLM behind clusters",
            new Leg("prefill-pool", rid, "\"kv_transfer_params\":{\"do_remote_decode\":true}"),
            new Leg("decode-pool", rid, "\"kv_transfer_params\":{\"do_remote_prefill\":true}"),
            true),
        new Flow(
            "SGLang (clusters, identical bodies)",
            new Leg("prefill-pool", Map.of(), "\"bootstrap_host\":\"10.0.0.2\",\"bootstrap_room\":8123456789"),
            new Leg("decode-pool", Map.of(), "\"bootstrap_host\":\"10.0.0.2\",\"bootstrap_room\":8123456789"),
            true),
        new Flow(
            "TensorRT-LLM",
            new Leg(
                null,
                Map.of(),
                "\"disaggregated_params\":{\"request_type\":\"context_only\",\"disagg_request_id\":9007199254740993}"),
            new Leg(
                null,
                Map.of(),
                "\"disaggregated_params\":{\"request_type\":\"generation_only\",\"ctx_request_id\":9007199254740993,"
                    + "\"disagg_request_id\":9007199254740993}"),
            false));
  }

  static List<Forgery> forgeries() {
    List<Map<String, String>> headers = new ArrayList<>();
    headers.add(Map.of());
    for (String phase : List.of("context", "prefill", "generation", "DECODE", " decode ", "junk")) {
      headers.add(Map.of("x-disagg-phase", phase));
    }
    headers.add(Map.of("x-trtllm-msgpack", "1"));
    headers.add(Map.of("x-disagg-phase", "prefill", "x-trtllm-msgpack", "1", "x-disagg-order", "concurrent"));
    headers.add(Map.of("epp-profile", "decode"));
    Map<String, String> bodies = new LinkedHashMap<>();
    bodies.put("", "");
    bodies.put("context_only", "\"disaggregated_params\":{\"request_type\":\"context_only\"}");
    bodies.put("generation_only", "\"disaggregated_params\":{\"request_type\":\"generation_only\"}");
    String ctxUsage = ForgedMembers.CTX_USAGE;
    bodies.put("ctx_usage", "\"disaggregated_params\":{" + ctxUsage + "}");
    bodies.put("generation_only+ctx_usage", "\"disaggregated_params\":{\"request_type\":\"generation_only\"," + ctxUsage + "}");
    bodies.put("vllm_xargs", "\"vllm_xargs\":{\"kv_transfer_params\":{\"do_remote_decode\":true}}");
    bodies.put(
        "extra_args", "\"sampling_params\":{\"extra_args\":{\"kv_transfer_params\":{\"do_remote_prefill\":true}}}");
    List<Forgery> all = new ArrayList<>();
    for (Map<String, String> h : headers) {
      for (Map.Entry<String, String> b : bodies.entrySet()) {
        String name = (h.isEmpty() ? "" : h.toString()) + (b.getKey().isEmpty() ? "" : " body " + b.getKey());
        all.add(new Forgery(name.isEmpty() ? "honest" : name.trim(), h, b.getValue()));
      }
    }
    return all;
  }

  static Stream<Arguments> cases() {
    List<Arguments> cases = new ArrayList<>();
    for (Flow flow : flows()) {
      for (Forgery forgery : forgeries()) {
        if (!forgery.members().isEmpty() && !flow.forwardsBodyFields()) {
          continue;
        }
        for (boolean forgedFirst : new boolean[] {false, true}) {
          cases.add(Arguments.of(flow.name(), forgery.name(), flow, forgery, forgedFirst));
        }
      }
    }
    return cases.stream();
  }

  @ParameterizedTest(name = "{0}: {1}, forged members first={4}")
  @MethodSource("cases")
  void noForgedInputMovesALegOrGoesUncounted(
      String flowName, String forgeryName, Flow flow, Forgery forgery, boolean forgedFirst) {
    Classification honestContext = classify(flow.context(), null, false);
    Classification honestGeneration = classify(flow.generation(), null, false);
    assertThat(honestContext.phase()).isEqualTo(Phase.CONTEXT);
    assertThat(honestGeneration.phase()).isEqualTo(Phase.GENERATION);
    assertThat(honestContext.refused()).isEmpty();
    assertThat(honestGeneration.refused()).isEmpty();

    Classification context = classify(flow.context(), forgery, forgedFirst);
    Classification generation = classify(flow.generation(), forgery, forgedFirst);
    assertThat(context.phase()).as("context leg's phase").isEqualTo(Phase.CONTEXT);
    assertThat(generation.phase()).as("generation leg's phase").isEqualTo(Phase.GENERATION);
    assertThat(context.keys()).as("context leg's keys").isEqualTo(honestContext.keys());
    assertThat(generation.keys()).as("generation leg's keys").isEqualTo(honestGeneration.keys());
    assertThat(generation.carriedContext()).as("a client's ctx_usage").isNull();

    Set<RefusedInput> refused = EnumSet.noneOf(RefusedInput.class);
    refused.addAll(context.refused());
    refused.addAll(generation.refused());
    if (forgery.namesAPhase()) {
      assertThat(refused).as("a forged phase is counted").isNotEmpty();
    }
    if (forgery.members().contains("ctx_usage")) {
      assertThat(generation.refused()).contains(RefusedInput.CTX_USAGE);
    }
    if ("1".equals(forgery.headers().get("x-trtllm-msgpack"))) {
      assertThat(context.refused()).contains(RefusedInput.MSGPACK_HEADER);
      assertThat(generation.refused()).contains(RefusedInput.MSGPACK_HEADER);
    }
    if (!forgery.namesAPhase() && !forgery.members().contains("ctx_usage")
        && !forgery.headers().containsKey("x-trtllm-msgpack")) {
      assertThat(refused).as("nothing refused where nothing was forged that could decide").isEmpty();
    }
  }

  /** Classifies a leg as the service does: the head, then the body read by the same reader. */
  private static Classification classify(Leg leg, Forgery forgery, boolean forgedFirst) {
    Map<String, String> headers = new LinkedHashMap<>(leg.headers());
    String members = leg.members();
    if (forgery != null) {
      forgery.headers().forEach((k, v) -> headers.putIfAbsent(k, v)); // a router keeps the client's first
      if (!forgery.members().isEmpty()) {
        members = forgedFirst ? forgery.members() + "," + members : members + "," + forgery.members();
      }
    }
    RequestHead head = new RequestHead("POST", "/v1/chat/completions", headers, leg.cluster());
    byte[] body = ("{\"model\":\"m\"," + PROMPT + "," + members + "}").getBytes(StandardCharsets.UTF_8);
    RequestBodyReader reader = RequestBodyReader.forRequest(head, RequestBodyScannerFuzzTest.JSON, 64 * 1024);
    reader.feed(ByteBuffer.wrap(body));
    reader.end();
    assertThat(reader.facts().malformed()).isFalse();
    return SHIPPED.classify(head, reader);
  }
}
