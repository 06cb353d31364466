package io.disaggusage.extproc.simulation.engines;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.simulation.engines.OpenAiWire.BadRequest;
import io.disaggusage.extproc.simulation.engines.WorkerReply.TokenCounts;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicLong;

/**
 * vLLM prefill/decode behind its reference proxy ({@code toy_proxy_server.py}, and the proxies built
 * like it): the same {@code X-Request-Id} on both calls; the prefill call is the client's body capped
 * to one token, not streamed, with {@code kv_transfer_params.do_remote_decode: true}; the decode call is
 * the client's body plus the prefill reply's {@code kv_transfer_params} ({@code do_remote_prefill: true}).
 * Strictly context-first. The decode worker reports {@code prompt_tokens - 1} as cached, as vLLM does
 * with the NIXL connector (the last prompt token is recomputed there; engines.md §2.2).
 */
public final class VllmEngine implements DisaggEngine {
  private final WordTokenizer tokenizer = new WordTokenizer();
  private final PrefixCache prefillCache;
  private final AtomicLong nextRequest = new AtomicLong();

  public VllmEngine(PrefixCache prefillCache) {
    this.prefillCache = prefillCache;
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
    return call(body, requestId);
  }

  @Override
  public WorkerReply context(WorkerCall call) {
    try {
      ObjectNode request = OpenAiWire.parseRequest(call);
      if (!request.path("kv_transfer_params").path("do_remote_decode").asBoolean()) {
        throw new BadRequest("kv_transfer_params.do_remote_decode: expected true on a prefill worker");
      }
      int[] prompt = tokenizer.encodeChat(OpenAiWire.messages(request));
      int cached = prefillCache.prefill(prompt);
      String requestId = call.headers().getOrDefault("x-request-id", "");
      ObjectNode body =
          OpenAiWire.chatCompletion(
              "chatcmpl-" + requestId, request.path("model").asText(),
              OpenAiWire.answerPieces(tokenizer, 1).get(0), "length", OpenAiWire.usage(prompt.length, 1, cached));
      ObjectNode params = body.putObject("kv_transfer_params");
      params.put("do_remote_prefill", true).put("do_remote_decode", false);
      var blocks = params.putArray("remote_block_ids");
      for (int b = 0; b < (prompt.length + prefillCache.blockTokens() - 1) / prefillCache.blockTokens(); b++) {
        blocks.add(b);
      }
      params.put("remote_engine_id", "prefill-engine-0").put("remote_request_id", requestId);
      params.put("remote_host", "10.0.0.2").put("remote_port", 5600).put("tp_size", 1);
      return new WorkerReply(200, OpenAiWire.JSON_TYPE, OpenAiWire.bytes(body), new TokenCounts(prompt.length, cached, 1));
    } catch (BadRequest e) {
      return e.reply();
    }
  }

  @Override
  public WorkerCall generationCall(
      ClientRequest request, ScheduleOrder order, WorkerCall contextCall, WorkerReply contextReply) {
    if (order != ScheduleOrder.CONTEXT_FIRST) {
      throw new IllegalArgumentException("vLLM proxies run prefill, then decode");
    }
    ObjectNode body = OpenAiWire.clientBody(request);
    try {
      body.set("kv_transfer_params", OpenAiWire.JSON.readTree(contextReply.body()).path("kv_transfer_params"));
    } catch (java.io.IOException e) {
      throw new IllegalStateException("the simulated prefill worker wrote JSON it cannot read", e);
    }
    return call(body, contextCall.headers().get("x-request-id"));
  }

  @Override
  public WorkerReply generation(WorkerCall call) {
    try {
      ObjectNode request = OpenAiWire.parseRequest(call);
      JsonNode params = request.path("kv_transfer_params");
      if (!params.path("do_remote_prefill").asBoolean()) {
        throw new BadRequest("kv_transfer_params.do_remote_prefill: expected true on a decode worker");
      }
      int prompt = tokenizer.encodeChat(OpenAiWire.messages(request)).length;
      List<String> pieces = OpenAiWire.answerPieces(tokenizer, request.path("max_tokens").asInt(16));
      // The bug: every transferred prompt token but the recomputed last one counts as a cache hit.
      return OpenAiWire.answer(
          OpenAiWire.Style.VLLM, "chatcmpl-" + call.headers().getOrDefault("x-request-id", ""),
          request.path("model").asText(), pieces, OpenAiWire.finishReason(tokenizer, pieces.size()),
          OpenAiWire.usage(prompt, pieces.size(), prompt - 1L), request.path("stream").asBoolean(),
          new TokenCounts(prompt, 0, pieces.size()));
    } catch (BadRequest e) {
      return e.reply();
    }
  }

  private static WorkerCall call(ObjectNode body, String requestId) {
    Map<String, String> headers = new LinkedHashMap<>();
    headers.put("content-type", OpenAiWire.JSON_TYPE);
    headers.put("x-request-id", requestId);
    return new WorkerCall("/v1/chat/completions", headers, OpenAiWire.bytes(body));
  }
}
