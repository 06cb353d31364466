package io.disaggusage.extproc.classify;

import io.disaggusage.extproc.classify.CorrelationKey.Source;
import io.disaggusage.extproc.exchange.Phase;
import java.nio.charset.StandardCharsets;
import io.disaggusage.extproc.usage.ContextUsage;
import java.util.ArrayList;
import java.util.EnumSet;
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
  private final PhaseHeaderPolicy phaseHeader;

  public ExchangeClassifier(ClassificationRules rules) {
    this.contextClusters = rules.contextClusters();
    this.generationClusters = rules.generationClusters();
    this.paths = rules.paths();
    this.maxKeyBytes = rules.maxKeyBytes();
    this.trustIdHeader = rules.trustIdHeader();
    this.phaseHeader = rules.phaseHeader();
  }

  /** Whether the exchange is on a handled path; everything else gets no further messages. */
  public boolean handles(RequestHead head) {
    return "POST".equals(head.method()) && paths.contains(head.path());
  }

  /**
   * Whether the request body has to be read. It holds the markers, ids and carried usage when the head
   * does not settle phase and correlation, and it always holds the prompt fingerprint that binds the two
   * legs: an {@code x-disagg-request-id} is exactly what a forged context or a colliding client id
   * carries, so only a deployment that trusts that header (the edge strips it) skips the read, and then
   * only where the cluster or, when the policy lets it, the phase header settles the phase.
   */
  public boolean needsBody(RequestHead head) {
    return !trustIdHeader || phaseFromHead(head) == null || head.header(ID_HEADER) == null;
  }

  /**
   * The decision for one exchange (behaviour.md §3). The phase is taken from the evidence a client
   * cannot forge first: the configured cluster, then the body markers the orchestrator writes (vLLM's
   * {@code kv_transfer_params} over TensorRT-LLM's {@code request_type} when both are present and
   * disagree), and the {@code x-disagg-phase} header only where neither decides and the policy lets it.
   * Inputs that were contradicted or may not decide are {@linkplain Classification#refused() refused}.
   */
  public Classification classify(RequestHead head, RequestFacts facts) {
    EnumSet<RefusedInput> refused = EnumSet.noneOf(RefusedInput.class);
    Phase cluster = phaseFromCluster(head);
    Phase trt = trtPhase(facts);
    Phase vllm = vllmPhase(facts);
    if (trt != Phase.NONE && vllm != Phase.NONE && trt != vllm) {
      refused.add(RefusedInput.MARKER_CONFLICT);
    }
    Phase body = vllm != Phase.NONE ? vllm : trt;
    if (cluster != null && body != Phase.NONE && body != cluster) {
      refused.add(RefusedInput.BODY_MARKER);
    }
    Phase header = phaseFromHeader(head);
    Phase phase = cluster != null ? cluster : body;
    if (phase == Phase.NONE && header != null && phaseHeader == PhaseHeaderPolicy.FALLBACK) {
      phase = header;
    }
    if (header != null && header != phase) {
      refused.add(RefusedInput.PHASE_HEADER);
    }
    // ctx_usage is TensorRT-LLM's orchestrator's, written into the generation_only request it builds; a
    // leg any other evidence decided carries one only because a client put it there and a router passed
    // it on (vLLM-family routers forward every body field but kv_transfer_params).
    // Where it is taken, it is a claim the rule bounds by the generation worker's own counts.
    boolean trtGeneration =
        phase == Phase.GENERATION && trt == Phase.GENERATION && vllm == Phase.NONE && facts.bootstrapRoom() == null;
    ContextUsage carried = trtGeneration && facts.trtCtxUsage() != null ? facts.trtCtxUsage().asClaim() : null;
    if (facts.trtCtxUsage() != null && carried == null) {
      refused.add(RefusedInput.CTX_USAGE);
    }
    if (phase == Phase.NONE) {
      return Classification.NONE.refusing(refused);
    }
    List<CorrelationKey> keys = keys(head, facts, phase);
    Ordering ordering = ordering(head, facts, keys);
    return new Classification(phase, keys, ordering, carried, refused);
  }

  /**
   * The decision on what {@code reader} has read of the body ({@code null}: no body was read), with a
   * MessagePack header the body contradicted refused.
   */
  public Classification classify(RequestHead head, RequestBodyReader reader) {
    if (reader == null) {
      return classify(head, RequestFacts.NONE);
    }
    Classification classification = classify(head, reader.facts());
    return reader.headerContradicted()
        ? classification.refusing(EnumSet.of(RefusedInput.MSGPACK_HEADER))
        : classification;
  }

  /**
   * What the request head alone decides: the configured cluster, else the phase header where the policy
   * lets a header decide; null when neither does. Only a body left unread ({@code trust_id_header}) is
   * classified on this alone.
   */
  Phase phaseFromHead(RequestHead head) {
    Phase cluster = phaseFromCluster(head);
    if (cluster != null || phaseHeader == PhaseHeaderPolicy.IGNORE) {
      return cluster;
    }
    return phaseFromHeader(head);
  }

  /** The configured cluster names; null when the exchange's cluster is in neither list. */
  private Phase phaseFromCluster(RequestHead head) {
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

  /** The {@code x-disagg-phase} header's phase; null when absent or not a phase name. */
  private static Phase phaseFromHeader(RequestHead head) {
    String header = head.header(PHASE_HEADER);
    if (header == null) {
      return null;
    }
    return switch (header.trim().toLowerCase(Locale.ROOT)) {
      case "context", "prefill" -> Phase.CONTEXT;
      case "generation", "decode" -> Phase.GENERATION;
      default -> null;
    };
  }

  /** TensorRT-LLM's {@code disaggregated_params.request_type}. */
  static Phase trtPhase(RequestFacts facts) {
    if ("context_only".equals(facts.trtRequestType())) {
      return Phase.CONTEXT;
    }
    if ("generation_only".equals(facts.trtRequestType())) {
      return Phase.GENERATION;
    }
    return Phase.NONE;
  }

  /** vLLM's {@code kv_transfer_params}: {@code do_remote_decode} on a context leg, prefill on a generation leg. */
  static Phase vllmPhase(RequestFacts facts) {
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
