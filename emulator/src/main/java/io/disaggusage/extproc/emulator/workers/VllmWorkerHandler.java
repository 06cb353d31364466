package io.disaggusage.extproc.emulator.workers;

import com.fasterxml.jackson.databind.JsonNode;
import io.disaggusage.extproc.emulator.engines.AnswerShape;
import io.disaggusage.extproc.emulator.engines.BadRequest;
import io.disaggusage.extproc.emulator.engines.OpenAiWire;
import io.disaggusage.extproc.emulator.engines.PrefixCache;
import io.disaggusage.extproc.emulator.engines.VllmEngine;
import io.disaggusage.extproc.emulator.engines.WordTokenizer;
import io.disaggusage.extproc.emulator.engines.WorkerReply;
import io.disaggusage.extproc.emulator.engines.WorkerReply.TokenCounts;
import java.util.List;

/**
 * A vLLM worker of either role: a request with {@code kv_transfer_params} is a leg of a P/D pair
 * ({@link EngineLegHandler}); a request without any is served whole, as vLLM serves it when no transfer
 * is asked for — prefilled on the worker's own prefix cache, its usage that cache's hits (no transfer, so
 * no miscount), {@code kv_transfer_params: null} in the answer. Proxies send such a request to a decode
 * worker when the prefill failed (llm-d's pd-sidecar falls back to its decoder with the client's bytes on a
 * prefill 5xx), and to both workers when no KV connector is named (SMG's connector-less vLLM mode: the
 * prefill gets the client's body capped to one token, the decode the client's body).
 */
final class VllmWorkerHandler implements CompletionHandler {
  private final WordTokenizer tokenizer = new WordTokenizer();
  private final CompletionHandler leg;
  private final PrefixCache ownCache;

  VllmWorkerHandler(CompletionHandler leg, PrefixCache ownCache) {
    this.leg = leg;
    this.ownCache = ownCache;
  }

  @Override
  public WorkerReply answer(RecordedRequest recorded) throws BadRequest {
    JsonNode request = OpenAiWire.parseRequest(recorded.body());
    if (request.has("kv_transfer_params")) {
      return leg.answer(recorded);
    }
    int[] prompt = OpenAiWire.prompt(tokenizer, request);
    AnswerShape shape = AnswerShape.of(request);
    int cached = ownCache.prefill(prompt);
    List<String> pieces = OpenAiWire.answerPieces(tokenizer, shape.maxTokens());
    List<String> ids = recorded.headerValues("x-request-id");
    String id = VllmEngine.idPrefix(recorded.path()) + (ids.isEmpty() ? "" : ids.get(0));
    return OpenAiWire.answer(
        OpenAiWire.Style.VLLM, id, request.path("model").asText(), pieces, OpenAiWire.finishReason(tokenizer, pieces.size()),
        prompt.length, cached, VllmEngine.createdCache(prompt.length, cached, ownCache.blockTokens()), shape, new TokenCounts(prompt.length, cached, (long) pieces.size() * shape.choices()));
  }
}
