package io.disaggusage.extproc.classify;

import io.disaggusage.extproc.classify.CorrelationKey.Source;
import io.disaggusage.extproc.exchange.Phase;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * Phase, correlation and ordering rules of behaviour.md §3–§4, on headers, the upstream cluster and
 * the facts read from the request body. Pure: no I/O, no state.
 */
public final class ExchangeClassifier {
  public static final String PHASE_HEADER = "x-disagg-phase";
  public static final String ID_HEADER = "x-disagg-request-id";
  public static final String ORDER_HEADER = "x-disagg-order";
  public static final String REQUEST_ID_HEADER = "x-request-id";

  private final Set<String> contextClusters;
  private final Set<String> generationClusters;
  private final Set<String> paths;
  private final int maxKeyBytes;
  private final boolean trustIdHeader;

  public ExchangeClassifier(ClassificationRules rules) {
    this.contextClusters = rules.contextClusters();
    this.generationClusters = rules.generationClusters();
    this.paths = rules.paths();
    this.maxKeyBytes = rules.maxKeyBytes();
    this.trustIdHeader = rules.trustIdHeader();
  }

  /** Whether the exchange is on a handled path; everything else gets no further messages. */
  public boolean handles(RequestHead head) {
    return "POST".equals(head.method()) && paths.contains(head.path());
  }

  /**
   * Whether the request body has to be read. It holds the markers, ids and carried usage when headers
   * (or the cluster) do not settle phase and correlation, and it always holds the prompt fingerprint
   * that binds the two legs: an {@code x-disagg-request-id} is exactly what a forged context or a
   * colliding client id carries, so only a deployment that trusts that header (the edge strips it) skips
   * the read.
   */
  public boolean needsBody(RequestHead head) {
    return !trustIdHeader || phaseFromHeadOrCluster(head) == null || head.header(ID_HEADER) == null;
  }

  public Classification classify(RequestHead head, RequestFacts facts) {
    Phase phase = phaseFromHeadOrCluster(head);
    if (phase == null) {
      phase = phaseFromBody(facts);
    }
    if (phase == Phase.NONE) {
      return Classification.NONE;
    }
    List<CorrelationKey> keys = keys(head, facts, phase);
    Ordering ordering = ordering(head, facts, keys);
    return new Classification(
        phase, keys, ordering, phase == Phase.GENERATION ? facts.trtCtxUsage() : null);
  }

  /** Rules 1 and 2: explicit header, then configured cluster names; null when neither decides. */
  Phase phaseFromHeadOrCluster(RequestHead head) {
    String header = head.header(PHASE_HEADER);
    if (header != null) {
      switch (header.trim().toLowerCase(Locale.ROOT)) {
        case "context", "prefill" -> {
          return Phase.CONTEXT;
        }
        case "generation", "decode" -> {
          return Phase.GENERATION;
        }
        default -> {}
      }
    }
    String cluster = head.clusterName();
    if (cluster != null) {
      if (contextClusters.contains(cluster)) {
        return Phase.CONTEXT;
      }
      if (generationClusters.contains(cluster)) {
        return Phase.GENERATION;
      }
    }
    return null;
  }

  /** Rule 3: TensorRT-LLM request_type, then vLLM kv_transfer_params; rule 4 otherwise. */
  static Phase phaseFromBody(RequestFacts facts) {
    if ("context_only".equals(facts.trtRequestType())) {
      return Phase.CONTEXT;
    }
    if ("generation_only".equals(facts.trtRequestType())) {
      return Phase.GENERATION;
    }
    if (facts.remoteDecode() && !facts.remotePrefill()) {
      return Phase.CONTEXT;
    }
    if (facts.remotePrefill() && !facts.remoteDecode()) {
      return Phase.GENERATION;
    }
    return Phase.NONE;
  }

  /**
   * Keys from the first source that has any, except vLLM's, which are all kept: an {@code x-request-id}
   * is first, and where the legs' ids differ the KV transfer joins them (behaviour.md §3, correlation).
   */
  private List<CorrelationKey> keys(RequestHead head, RequestFacts facts, Phase phase) {
    List<CorrelationKey> keys = new ArrayList<>(2);
    add(keys, Source.HEADER, head.header(ID_HEADER));
    if (!keys.isEmpty()) {
      return keys;
    }
    if (phase == Phase.GENERATION) {
      // The ctx_request_id carried into a generation request is the context attempt that succeeded.
      add(keys, Source.TRTLLM, facts.trtCtxRequestId());
      add(keys, Source.TRTLLM, facts.trtDisaggRequestId());
    } else {
      add(keys, Source.TRTLLM, facts.trtDisaggRequestId());
    }
    if (!keys.isEmpty()) {
      return keys;
    }
    // A bootstrap_room array (n>1, batches) arrives as a digest of the whole array: both legs carry
    // the same body, and each leg's usage covers the whole request, so the rule applies unchanged.
    if (facts.bootstrapRoom() != null) {
      String host = facts.bootstrapHost() == null ? "" : facts.bootstrapHost();
      add(keys, Source.SGLANG, host + "|" + facts.bootstrapRoom());
      if (!keys.isEmpty()) {
        return keys;
      }
    }
    // vLLM: the id a router shares, then what the KV transfer itself shares, where no id is shared
    // (SMG sends none, and Envoy then gives each leg its own). A context leg learns its
    // remote_request_id from its response (ContextStoreKeys); the decode request carries it back.
    add(keys, Source.REQUEST_ID, head.header(REQUEST_ID_HEADER));
    add(keys, Source.TRANSFER_ID, facts.kvTransferId());
    if (phase == Phase.GENERATION) {
      add(keys, Source.REMOTE_REQUEST_ID, facts.kvRemoteRequestId());
    }
    return keys;
  }

  private void add(List<CorrelationKey> keys, Source source, String value) {
    if (value == null || value.isEmpty()) {
      return;
    }
    if (value.getBytes(StandardCharsets.UTF_8).length > maxKeyBytes) {
      return; // an over-long key is no key: the exchange is simply not correlated
    }
    CorrelationKey key = new CorrelationKey(source, value);
    if (!keys.contains(key)) {
      keys.add(key);
    }
  }

  private static Ordering ordering(RequestHead head, RequestFacts facts, List<CorrelationKey> keys) {
    String order = head.header(ORDER_HEADER);
    if (order != null) {
      return order.trim().equalsIgnoreCase("concurrent") ? Ordering.CONCURRENT : Ordering.CONTEXT_FIRST;
    }
    String style = facts.trtScheduleStyle();
    if ("1".equals(style) || "generation_first".equalsIgnoreCase(style)) {
      return Ordering.CONCURRENT;
    }
    // SGLang always dispatches both legs at once.
    if (!keys.isEmpty() && keys.get(0).source() == Source.SGLANG) {
      return Ordering.CONCURRENT;
    }
    return Ordering.CONTEXT_FIRST;
  }
}
