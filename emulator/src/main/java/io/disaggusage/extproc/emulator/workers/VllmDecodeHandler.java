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
 * A vLLM decode worker ({@code kv_role: kv_both}): a request with {@code kv_transfer_params} is the
 * decode leg of a P/D pair ({@link EngineLegHandler}); a request without any is served whole, as vLLM
 * serves it when no transfer is asked for — prefilled on the worker's own prefix cache, its usage that
 * cache's hits (no transfer, so no miscount). Proxies send such a request when the prefill failed
 * (llm-d's pd-sidecar falls back to its decoder with the client's bytes on a prefill 5xx).
 */
final class VllmDecodeHandler implements CompletionHandler {
  private final WordTokenizer tokenizer = new WordTokenizer();
  private final CompletionHandler decodeLeg;
  private final PrefixCache ownCache;

  VllmDecodeHandler(CompletionHandler decodeLeg, PrefixCache ownCache) {
    this.decodeLeg = decodeLeg;
    this.ownCache = ownCache;
  }

  @Override
  public WorkerReply complete(RecordedRequest recorded) {
    JsonNode request;
    try {
      request = OpenAiWire.parseRequest(recorded.body());
    } catch (BadRequest e) {
      return e.reply();
    }
    if (request.has("kv_transfer_params")) {
      return decodeLeg.complete(recorded);
    }
    try {
      int[] prompt = tokenizer.encodeChat(OpenAiWire.messages(request));
      AnswerShape shape = AnswerShape.of(request);
      int cached = ownCache.prefill(prompt);
      List<String> pieces = OpenAiWire.answerPieces(tokenizer, shape.maxTokens());
      List<String> ids = recorded.headerValues("x-request-id");
      String id = "chatcmpl-" + (ids.isEmpty() ? "" : ids.get(0));
      return OpenAiWire.answer(
          OpenAiWire.Style.VLLM, id, request.path("model").asText(), pieces, OpenAiWire.finishReason(tokenizer, pieces.size()),
          prompt.length, cached, VllmEngine.createdCache(prompt.length, cached, ownCache.blockTokens()), shape, new TokenCounts(prompt.length, cached, (long) pieces.size() * shape.choices()));
    } catch (BadRequest e) {
      return e.reply();
    }
  }
}
