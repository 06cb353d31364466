package io.disaggusage.extproc.emulator.engines;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicLong;

/**
 * vLLM prefill/decode behind its reference proxy ({@code toy_proxy_server.py}, and the proxies built
 * like it): the same {@code X-Request-Id} on both calls; the prefill call is the client's body capped
 * to one token, not streamed, with {@code kv_transfer_params.do_remote_decode: true}; the decode call is
 * the client's body plus the prefill reply's {@code kv_transfer_params} ({@code do_remote_prefill: true}).
 * Strictly context-first. With {@link UsageVariant#BUG} the decode worker reports
 * {@code prompt_tokens - 1} as cached, as vLLM does with the NIXL connector (the last prompt token is
 * recomputed there; engines.md §2.2, #43370); {@link UsageVariant#WHOLE_PROMPT_BUG} reports the whole
 * prompt (#47136); {@link UsageVariant#FIXED} is #54222: the prefill returns
 * {@code remote_prefill_cached_tokens} in its {@code kv_transfer_params} and the decode reports it when
 * the proxy forwarded it (else the whole prompt, as vLLM 0.32 was measured to report). Every variant
 * answers on vLLM 0.32's wire ({@link VllmWire}); the variants differ only in the decode's cached count
 * and whether the prefill returns {@code remote_prefill_cached_tokens}.
 */
public final class VllmEngine extends SimulatedEngine {
  private static final String REQUEST_ID = "x-request-id";
  /** The prefill's own cached count in its returned {@code kv_transfer_params} (#54222). */
  private static final String REMOTE_CACHED = "remote_prefill_cached_tokens";

  /** The prefill engine's id, a UUID like vLLM's. */
  private static final String ENGINE_ID = UUID.nameUUIDFromBytes("prefill-engine-0".getBytes(StandardCharsets.UTF_8)).toString();

  private final AtomicLong nextRequest = new AtomicLong();

  public VllmEngine(PrefixCache prefillCache) {
    this(prefillCache, UsageVariant.BUG);
  }

  public VllmEngine(PrefixCache prefillCache, UsageVariant variant) {
    super(prefillCache, variant);
  }

  @Override
  public String name() {
    return "vLLM";
  }

  @Override
  public List<ScheduleOrder> orders() {
    return List.of(ScheduleOrder.CONTEXT_FIRST);
  }

  @Override
  public WorkerCall contextCall(ClientRequest request, ScheduleOrder order) {
    ObjectNode body = OpenAiWire.clientBody(request);
    body.put("max_tokens", 1);
    body.put("stream", false);
    body.remove("stream_options");
    ObjectNode params = body.putObject("kv_transfer_params");
    params.put("do_remote_decode", true).put("do_remote_prefill", false);
    params.putNull("remote_engine_id").putNull("remote_block_ids").putNull("remote_host").putNull("remote_port");
    // A UUID like the proxies' uuid4, but reproducible from the request number.
    String requestId =
        UUID.nameUUIDFromBytes(("vllm-demo-" + nextRequest.getAndIncrement()).getBytes(StandardCharsets.UTF_8)).toString();
    return jsonCall(body, Map.of(REQUEST_ID, requestId));
  }

  @Override
  public WorkerCall generationCall(
      ClientRequest request, ScheduleOrder order, WorkerCall contextCall, WorkerReply contextReply) {
    if (order != ScheduleOrder.CONTEXT_FIRST) {
      throw new IllegalArgumentException("vLLM proxies run prefill, then decode");
    }
    ObjectNode body = OpenAiWire.clientBody(request);
    body.set("kv_transfer_params", read(contextReply.body()).path("kv_transfer_params"));
    return jsonCall(body, Map.of(REQUEST_ID, contextCall.headers().get(REQUEST_ID)));
  }

  @Override
  void requireContextCall(JsonNode request) throws BadRequest {
    if (!request.path("kv_transfer_params").path("do_remote_decode").asBoolean()) {
      throw new BadRequest("kv_transfer_params.do_remote_decode: expected true on a prefill worker");
    }
  }

  @Override
  void requireGenerationCall(JsonNode request) throws BadRequest {
    if (!request.path("kv_transfer_params").path("do_remote_prefill").asBoolean()) {
      throw new BadRequest("kv_transfer_params.do_remote_prefill: expected true on a decode worker");
    }
  }

  /**
   * vLLM names its responses after the request's {@code X-Request-Id} ({@code chatcmpl-<id>}, {@code
   * cmpl-<id>} for completions), or, without one, a random uuid's hex ({@code random_uuid()}): two
   * requests without an id never share a name, nor a KV transfer handle.
   */
  @Override
  String responseId(WorkerCall call, JsonNode request, boolean context) {
    String requestId = call.headers().get(REQUEST_ID);
    return idPrefix(call.path()) + (requestId != null ? requestId : UUID.randomUUID().toString().replace("-", ""));
  }

  /** The prefix of vLLM's request ids on {@code path}. */
  public static String idPrefix(String path) {
    return CompletionsWire.PATH.equals(path) ? "cmpl-" : "chatcmpl-";
  }

  /** vLLM 0.32's JSON answer; the prefill reports the prompt tokens it newly cached. */
  @Override
  ObjectNode contextReply(String id, String model, String token, int prompt, int cached) {
    return VllmWire.completion(id, model, 1, token, "length", prompt, 1, cached, createdCache(prompt, cached, blockTokens()));
  }

  /**
   * The prompt tokens a vLLM worker newly writes to its prefix cache ({@code created_cache_tokens}): the
   * prompt's full blocks it did not find cached.
   */
  public static long createdCache(int prompt, int cached, int blockTokens) {
    return Math.max(0, (long) prompt / blockTokens * blockTokens - cached);
  }

  /**
   * NixlConnector's parameters the decode worker pulls the KV blocks with, as vLLM 0.32 returns them
   * (members in its order; {@code remote_request_id} the response id with a random suffix, reproducible
   * here; {@code remote_prefill_cached_tokens} since #54222, the {@link UsageVariant#FIXED} release).
   */
  @Override
  void addHandoff(ObjectNode reply, WorkerCall call, JsonNode request, int[] prompt, int cached) {
    ObjectNode params = OpenAiWire.JSON.createObjectNode();
    params.put("do_remote_prefill", true).put("do_remote_decode", false);
    var blocks = params.putArray("remote_block_ids").addArray();
    for (int b = 0; b < (prompt.length + blockTokens() - 1) / blockTokens(); b++) {
      blocks.add(b + 1);
    }
    String responseId = reply.path("id").asText();
    String suffix = String.format("%08x", responseId.hashCode());
    params.put("remote_engine_id", ENGINE_ID).put("remote_request_id", responseId + "-" + suffix);
    params.put("remote_host", "10.0.0.2").put("remote_port", 5600).put("tp_size", 1).put("dcp_size", 1).put("pp_size", 1);
    params.put("remote_num_tokens", prompt.length).putNull("remote_blocks_expiry_time").put("transfer_mode", "pull");
    if (variant == UsageVariant.FIXED) {
      params.put(REMOTE_CACHED, cached);
    }
    reply.set("kv_transfer_params", params); // in the place vLLM writes it, after prompt_text
  }

  @Override
  long reportedCached(JsonNode request, int prompt) {
    JsonNode forwarded = request.path("kv_transfer_params").path(REMOTE_CACHED);
    return switch (variant) {
      // without the forwarded count vLLM 0.32 counts every transferred token (measured on the real pair)
      case FIXED -> forwarded.isIntegralNumber() ? forwarded.asLong() : prompt;
      case WHOLE_PROMPT_BUG -> prompt;
      // every transferred prompt token but the recomputed last one counts as a cache hit
      case BUG -> prompt - 1L;
    };
  }

  @Override
  OpenAiWire.Style style() {
    return OpenAiWire.Style.VLLM;
  }
}
