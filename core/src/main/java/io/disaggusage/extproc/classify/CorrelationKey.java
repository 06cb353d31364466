package io.disaggusage.extproc.classify;

import java.util.List;
import java.util.Objects;

/**
 * A key that joins a context exchange to its generation exchange. Keys are namespaced by their source
 * (behaviour.md §3), so an {@code x-request-id} can never collide with a TensorRT-LLM id of the same text.
 */
public record CorrelationKey(Source source, String value) {

  /** Where a key was read from; the prefix keeps sources apart in a shared store. */
  public enum Source {
    /** Request header {@code x-disagg-request-id}. */
    HEADER("hdr", "x-disagg-request-id"),
    /** TensorRT-LLM {@code disagg_request_id} / {@code ctx_request_id} (exact int64, decimal). */
    TRTLLM("trt", "TensorRT-LLM request id"),
    /** SGLang {@code bootstrap_host} + {@code bootstrap_room}. */
    SGLANG("sgl", "SGLang bootstrap room"),
    /** Request header {@code x-request-id} (vLLM proxies, llm-d sidecars). */
    REQUEST_ID("xrid", "x-request-id"),
    /** {@code kv_transfer_params.transfer_id}, minted by a router for both legs (SMG's Mooncake mode). */
    TRANSFER_ID("kvt", "kv_transfer_params.transfer_id"),
    /**
     * vLLM's {@code kv_transfer_params.remote_request_id}: the prefill response names its request, and
     * the router relays it in the decode request (NIXL: the toy proxy, vllm-router, llm-d, SMG).
     */
    REMOTE_REQUEST_ID("kvr", "kv_transfer_params.remote_request_id");

    private final String prefix;
    private final String description;

    Source(String prefix, String description) {
      this.prefix = prefix;
      this.description = description;
    }

    /** How operators know the source in a log line: the header or body field it is read from. */
    public String description() {
      return description;
    }

    public String prefix() {
      return prefix;
    }
  }

  public CorrelationKey {
    Objects.requireNonNull(source, "source");
    Objects.requireNonNull(value, "value");
  }

  /** The namespaced form used as a store key, e.g. {@code trt:2748779069441234567}. */
  public String storeKey() {
    return source.prefix + ":" + value;
  }

  /** The distinct {@linkplain #storeKey store keys} of {@code keys}, in their order. */
  public static List<String> storeKeys(List<CorrelationKey> keys) {
    return keys.stream().map(CorrelationKey::storeKey).distinct().toList();
  }

  @Override
  public String toString() {
    return storeKey();
  }
}
