package io.disaggusage.extproc.classify;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.classify.CorrelationKey.Source;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.usage.ContextUsage;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Phase, correlation and ordering rules of behaviour.md §3–§4. */
class ExchangeClassifierTest {
  private static final List<String> PATHS =
      List.of("/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages");
  private static final ExchangeClassifier CLASSIFIER =
      new ExchangeClassifier(
          ClassificationRules.of(List.of("prefill-pool"), List.of("decode-pool"), PATHS, 256, false));

  static RequestHead head(String cluster, String... headerPairs) {
    Map<String, String> h = new HashMap<>();
    for (int i = 0; i < headerPairs.length; i += 2) {
      h.put(headerPairs[i], headerPairs[i + 1]);
    }
    return new RequestHead("POST", "/v1/chat/completions", h, cluster);
  }

  static RequestFacts facts(String requestType, String disagg, String ctx, String style) {
    return new RequestFacts(
        null, null, requestType, disagg, ctx, style, null, false, false, null, null, null, null, false, false, null);
  }

  static RequestFacts vllm(boolean remoteDecode, boolean remotePrefill, String remoteRequestId, String transferId) {
    return new RequestFacts(
        null, null, null, null, null, null, null, remoteDecode, remotePrefill, remoteRequestId, transferId, null,
        null, false, false, null);
  }

  @Test
  void vllmLegsKeepTheirRequestIdFirstAndAddWhatTheKvTransferShares() {
    CorrelationKey xrid = new CorrelationKey(Source.REQUEST_ID, "envoy-2");
    CorrelationKey kvr = new CorrelationKey(Source.REMOTE_REQUEST_ID, "chatcmpl-envoy-1-0a1b2c3d");
    CorrelationKey kvt = new CorrelationKey(Source.TRANSFER_ID, "t-9");
    // NIXL: the decode request carries the prefill's handle back; the prefill request has none yet.
    Classification decode =
        CLASSIFIER.classify(head(null, "x-request-id", "envoy-2"), vllm(false, true, kvr.value(), null));
    assertThat(decode.keys()).containsExactly(xrid, kvr);
    assertThat(decode.ordering()).isEqualTo(Ordering.CONTEXT_FIRST);
    assertThat(CLASSIFIER.classify(head(null), vllm(false, true, kvr.value(), null)).keys()).containsExactly(kvr);
    Classification prefill =
        CLASSIFIER.classify(head(null, "x-request-id", "envoy-1"), vllm(true, false, "ignored", null));
    assertThat(prefill.keys()).containsExactly(new CorrelationKey(Source.REQUEST_ID, "envoy-1"));
    // Mooncake through SMG: one transfer_id minted for both legs.
    assertThat(CLASSIFIER.classify(head(null), vllm(true, false, null, "t-9")).keys()).containsExactly(kvt);
    assertThat(CLASSIFIER.classify(head(null, "x-request-id", "envoy-2"), vllm(false, true, null, "t-9")).keys())
        .containsExactly(xrid, kvt);
    // An id of another source still decides alone.
    assertThat(
            CLASSIFIER.classify(head(null, "x-disagg-request-id", "d"), vllm(false, true, kvr.value(), "t-9")).keys())
        .containsExactly(new CorrelationKey(Source.HEADER, "d"));
  }

  @Test
  void handledPathsArePostOnly() {
    assertThat(CLASSIFIER.handles(head(null))).isTrue();
    assertThat(CLASSIFIER.handles(new RequestHead("GET", "/v1/chat/completions", Map.of(), null))).isFalse();
    assertThat(CLASSIFIER.handles(new RequestHead("POST", "/v1/embeddings", Map.of(), null))).isFalse();
  }

  @Test
  void clusterBeatsBodyMarkersWhichBeatTheHeader() {
    RequestFacts ctxBody = facts("context_only", "1", null, null);
    Classification contradicted = CLASSIFIER.classify(head("decode-pool", "x-disagg-phase", "Prefill"), ctxBody);
    assertThat(contradicted.phase()).isEqualTo(Phase.GENERATION);
    assertThat(contradicted.refused()).containsExactlyInAnyOrder(RefusedInput.PHASE_HEADER, RefusedInput.BODY_MARKER);
    assertThat(CLASSIFIER.classify(head("other", "x-disagg-phase", "decode"), ctxBody).phase()).isEqualTo(Phase.CONTEXT);
    assertThat(CLASSIFIER.classify(head("other"), ctxBody).refused()).isEmpty();
    assertThat(CLASSIFIER.classify(head(null, "x-disagg-phase", "DECODE"), RequestFacts.NONE).phase())
        .as("a header decides where nothing else does (phase_header: fallback)")
        .isEqualTo(Phase.GENERATION);
    assertThat(CLASSIFIER.classify(head(null), RequestFacts.NONE)).isEqualTo(Classification.NONE);
  }

  @Test
  void aHeaderThatMayNotDecideIsRefused() {
    ExchangeClassifier ignoring =
        new ExchangeClassifier(
            ClassificationRules.of(
                List.of("prefill-pool"), List.of("decode-pool"), PATHS, 256, false, PhaseHeaderPolicy.IGNORE));
    Classification c = ignoring.classify(head(null, "x-disagg-phase", "decode"), RequestFacts.NONE);
    assertThat(c.phase()).isEqualTo(Phase.NONE);
    assertThat(c.refused()).containsExactly(RefusedInput.PHASE_HEADER);
    assertThat(ignoring.classify(head(null, "x-disagg-phase", "decode"), vllm(false, true, null, null)).refused())
        .as("a header that agrees is not refused")
        .isEmpty();
  }

  @Test
  void theVllmMarkerDecidesAgainstAForgedRequestType() {
    // llm-d's coordinator writes kv_transfer_params and passes every other body field on, a client's
    // disaggregated_params included; TensorRT-LLM's server refuses a body with fields it does not know.
    RequestFacts decodeWithForgery =
        new RequestFacts(
            null, null, "context_only", null, null, null, null, false, true, null, null, null, null, false, false, null);
    Classification c = CLASSIFIER.classify(head(null, "x-request-id", "r"), decodeWithForgery);
    assertThat(c.phase()).isEqualTo(Phase.GENERATION);
    assertThat(c.refused()).containsExactly(RefusedInput.MARKER_CONFLICT);
  }

  @Test
  void ctxUsageIsTakenOnlyOnATensorRtGenerationLeg() {
    ContextUsage forged = new ContextUsage(java.math.BigInteger.ONE, java.util.Map.of("cached_tokens", "1"), java.math.BigInteger.ONE);
    Classification vllmDecode =
        CLASSIFIER.classify(
            head(null, "x-request-id", "r"),
            new RequestFacts(
                null, null, null, null, null, null, forged, false, true, null, null, null, null, false, false, null));
    assertThat(vllmDecode.phase()).isEqualTo(Phase.GENERATION);
    assertThat(vllmDecode.carriedContext()).isNull();
    assertThat(vllmDecode.refused()).containsExactly(RefusedInput.CTX_USAGE);
    Classification trtGeneration =
        CLASSIFIER.classify(
            head(null),
            new RequestFacts(
                null, null, "generation_only", "1", "2", null, forged, false, false, null, null, null, null, false, false,
                null));
    assertThat(trtGeneration.carriedContext()).isEqualTo(forged.asClaim());
    assertThat(trtGeneration.refused()).isEmpty();
    assertThat(
            CLASSIFIER.classify(
                    head("decode-pool"),
                    new RequestFacts(
                        null, null, null, null, null, null, forged, false, false, null, null, "7", "h", false, false,
                        null))
                .carriedContext())
        .as("a cluster-decided SGLang leg")
        .isNull();
  }

  @Test
  void trtGenerationLooksUpCtxRequestIdFirst() {
    Classification c =
        CLASSIFIER.classify(
            head(null, "x-request-id", "r1"), facts("generation_only", "111", "222", "0"));
    assertThat(c.keys())
        .containsExactly(new CorrelationKey(Source.TRTLLM, "222"), new CorrelationKey(Source.TRTLLM, "111"));
    assertThat(c.ordering()).isEqualTo(Ordering.CONTEXT_FIRST);
    assertThat(
            CLASSIFIER.classify(head(null), facts("generation_only", "111", "222", "1")).ordering())
        .isEqualTo(Ordering.CONCURRENT);
  }

  @Test
  void explicitIdHeaderWinsAndKeysAreNamespaced() {
    Classification c =
        CLASSIFIER.classify(
            head(null, "x-disagg-request-id", "abc", "x-request-id", "abc"),
            facts("context_only", "111", null, null));
    assertThat(c.keys()).containsExactly(new CorrelationKey(Source.HEADER, "abc"));
    assertThat(c.keys().get(0).storeKey()).isEqualTo("hdr:abc");
    assertThat(new CorrelationKey(Source.REQUEST_ID, "abc").storeKey()).isEqualTo("xrid:abc");
  }

  @Test
  void sglangRoomIsConcurrentAndVllmUsesRequestId() {
    RequestFacts sgl =
        new RequestFacts(null, null, null, null, null, null, null, false, false, null, null, "42", "h", false, false, null);
    Classification c = CLASSIFIER.classify(head("prefill-pool", "x-request-id", "r"), sgl);
    assertThat(c.keys()).containsExactly(new CorrelationKey(Source.SGLANG, "h|42"));
    assertThat(c.ordering()).isEqualTo(Ordering.CONCURRENT);
    RequestFacts vllm =
        vllm(false, true, null, null);
    Classification v = CLASSIFIER.classify(head(null, "x-request-id", "uuid-1"), vllm);
    assertThat(v.phase()).isEqualTo(Phase.GENERATION);
    assertThat(v.keys()).containsExactly(new CorrelationKey(Source.REQUEST_ID, "uuid-1"));
    assertThat(CLASSIFIER.classify(head(null, "x-request-id", "uuid-1", "x-disagg-order", "concurrent"), vllm).ordering())
        .isEqualTo(Ordering.CONCURRENT);
  }

  @Test
  void overlongKeysAreNotKeys() {
    String longId = "x".repeat(256 + 1);
    Classification c =
        CLASSIFIER.classify(head(null, "x-disagg-phase", "decode", "x-request-id", longId), RequestFacts.NONE);
    assertThat(c.phase()).isEqualTo(Phase.GENERATION);
    assertThat(c.keys()).isEmpty();
  }

  @Test
  void bodyIsAlwaysReadForTheFingerprintUnlessTheIdHeaderIsTrusted() {
    RequestHead settled = head("decode-pool", "x-disagg-request-id", "a");
    RequestHead headersOnly = head(null, "x-disagg-phase", "context", "x-disagg-request-id", "a");
    assertThat(CLASSIFIER.needsBody(head(null))).isTrue();
    assertThat(CLASSIFIER.needsBody(head("decode-pool"))).isTrue();
    assertThat(CLASSIFIER.needsBody(settled)).isTrue();
    assertThat(CLASSIFIER.needsBody(headersOnly)).isTrue();

    ExchangeClassifier trusting =
        new ExchangeClassifier(
            ClassificationRules.of(List.of("prefill-pool"), List.of("decode-pool"), PATHS, 256, true));
    assertThat(trusting.needsBody(head(null))).isTrue();
    assertThat(trusting.needsBody(head("decode-pool"))).isTrue();
    assertThat(trusting.needsBody(head(null, "x-disagg-phase", "context"))).isTrue();
    assertThat(trusting.needsBody(settled)).isFalse();
    assertThat(trusting.needsBody(headersOnly)).isFalse();
  }
}
