package io.disaggusage.extproc.classify;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.usage.ContextUsage;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Every combination of what decides a leg — cluster × {@code x-disagg-phase} header (spellings, junk,
 * absent) × TensorRT-LLM {@code request_type} × vLLM {@code kv_transfer_params} flags × a carried
 * {@code ctx_usage} × an SGLang room × the header policy — classified, and the rules of behaviour.md §3
 * checked on each: who decides, that a client's inputs (the header, {@code request_type}, {@code ctx_usage})
 * never change the phase of a leg that the cluster or a vLLM marker decides nor give a vLLM leg a carried
 * usage, when a carried usage is taken (and that it is a claim the rule bounds), and that every input not
 * followed is refused.
 */
class ClassifierInputsExhaustiveTest {
  static final List<String> CLUSTERS = Arrays.asList(null, "prefill-pool", "decode-pool", "other");
  static final List<String> HEADERS =
      Arrays.asList(null, "context", "Prefill", "generation", "DECODE", " decode ", "junk", "");
  static final List<String> REQUEST_TYPES = Arrays.asList(null, "context_only", "generation_only", "aggregate");
  static final ContextUsage CTX_USAGE =
      new ContextUsage(BigInteger.ONE, Map.of("cached_tokens", "1"), BigInteger.ONE);

  static Phase cluster(String cluster) {
    return "prefill-pool".equals(cluster) ? Phase.CONTEXT : "decode-pool".equals(cluster) ? Phase.GENERATION : null;
  }

  static Phase header(String header) {
    if (header == null) {
      return null;
    }
    return switch (header.trim().toLowerCase(java.util.Locale.ROOT)) {
      case "context", "prefill" -> Phase.CONTEXT;
      case "generation", "decode" -> Phase.GENERATION;
      default -> null;
    };
  }

  @Test
  void everyCombinationFollowsTheRules() {
    int cases = 0;
    List<String> failures = new ArrayList<>();
    for (PhaseHeaderPolicy policy : PhaseHeaderPolicy.values()) {
      ExchangeClassifier classifier =
          new ExchangeClassifier(
              ClassificationRules.of(
                  List.of("prefill-pool"), List.of("decode-pool"), List.of("/v1/chat/completions"), 256, false,
                  policy));
      for (String cluster : CLUSTERS) {
        for (String header : HEADERS) {
          for (String requestType : REQUEST_TYPES) {
            for (int kv = 0; kv < 4; kv++) {
              for (boolean ctx : new boolean[] {false, true}) {
                for (boolean room : new boolean[] {false, true}) {
                  cases++;
                  boolean remoteDecode = (kv & 1) != 0;
                  boolean remotePrefill = (kv & 2) != 0;
                  Map<String, String> headers = new HashMap<>();
                  headers.put("x-request-id", "r");
                  if (header != null) {
                    headers.put("x-disagg-phase", header);
                  }
                  RequestHead head = new RequestHead("POST", "/v1/chat/completions", headers, cluster);
                  RequestFacts facts = new RequestFacts(
                      "m", false, requestType, "7", null, null, ctx ? CTX_USAGE : null, remoteDecode, remotePrefill,
                      null, null, room ? "42" : null, room ? "h" : null, false, false, null);
                  Classification c = classifier.classify(head, facts);
                  String what = policy + " cluster=" + cluster + " header=" + header + " request_type=" + requestType
                      + " remote_decode=" + remoteDecode + " remote_prefill=" + remotePrefill + " ctx_usage=" + ctx
                      + " room=" + room + ": " + c;
                  check(what, c, policy, cluster, header, requestType, remoteDecode, remotePrefill, ctx, room, failures);
                  // The same leg with a client's inputs taken away is decided alike wherever the cluster or a
                  // vLLM marker decides: those inputs move nothing there.
                  Phase vllm = ExchangeClassifier.vllmPhase(facts);
                  if (cluster(cluster) != null || vllm != Phase.NONE) {
                    RequestFacts honest = new RequestFacts(
                        "m", false, null, "7", null, null, null, remoteDecode, remotePrefill, null, null,
                        room ? "42" : null, room ? "h" : null, false, false, null);
                    Map<String, String> noHeader = Map.of("x-request-id", "r");
                    Classification h =
                        classifier.classify(new RequestHead("POST", "/v1/chat/completions", noHeader, cluster), honest);
                    if (h.phase() != c.phase() || (vllm != Phase.NONE && c.carriedContext() != null)) {
                      failures.add(what + " — without the client's inputs: " + h);
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
    assertThat(cases).isEqualTo(2 * 4 * 8 * 4 * 4 * 2 * 2);
    assertThat(failures).isEmpty();
  }

  private static void check(
      String what, Classification c, PhaseHeaderPolicy policy, String cluster, String header, String requestType,
      boolean remoteDecode, boolean remotePrefill, boolean ctx, boolean room, List<String> failures) {
    Phase vllm = remoteDecode == remotePrefill ? Phase.NONE : remoteDecode ? Phase.CONTEXT : Phase.GENERATION;
    Phase trt = "context_only".equals(requestType) ? Phase.CONTEXT
        : "generation_only".equals(requestType) ? Phase.GENERATION : Phase.NONE;
    Phase body = vllm != Phase.NONE ? vllm : trt;
    Phase expected = cluster(cluster) != null ? cluster(cluster)
        : body != Phase.NONE ? body
        : policy == PhaseHeaderPolicy.FALLBACK && header(header) != null ? header(header)
        : Phase.NONE;
    expect(failures, what, "phase", c.phase() == expected);
    boolean headerRefused = header(header) != null && header(header) != expected;
    expect(failures, what, "phase_header refused", c.refused().contains(RefusedInput.PHASE_HEADER) == headerRefused);
    expect(failures, what, "marker_conflict refused",
        c.refused().contains(RefusedInput.MARKER_CONFLICT) == (vllm != Phase.NONE && trt != Phase.NONE && vllm != trt));
    expect(failures, what, "body_marker refused",
        c.refused().contains(RefusedInput.BODY_MARKER) == (cluster(cluster) != null && body != Phase.NONE && body != cluster(cluster)));
    boolean taken = ctx && expected == Phase.GENERATION && trt == Phase.GENERATION && vllm == Phase.NONE && !room;
    expect(failures, what, "carried usage taken", (c.carriedContext() != null) == taken);
    expect(failures, what, "a carried usage is a claim", c.carriedContext() == null || c.carriedContext().claimed());
    expect(failures, what, "ctx_usage refused", c.refused().contains(RefusedInput.CTX_USAGE) == (ctx && !taken));
    expect(failures, what, "keys only for a phase", expected != Phase.NONE || c.keys().isEmpty());
  }

  private static void expect(List<String> failures, String what, String rule, boolean holds) {
    if (!holds) {
      failures.add(rule + ": " + what);
    }
  }
}
