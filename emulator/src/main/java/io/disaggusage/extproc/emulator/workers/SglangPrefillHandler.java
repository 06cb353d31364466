package io.disaggusage.extproc.emulator.workers;

import io.disaggusage.extproc.emulator.engines.BadRequest;
import io.disaggusage.extproc.emulator.engines.OpenAiWire;
import io.disaggusage.extproc.emulator.engines.PrefixCache;
import io.disaggusage.extproc.emulator.engines.WordTokenizer;
import io.disaggusage.extproc.emulator.engines.WorkerReply;
import io.disaggusage.extproc.emulator.engines.WorkerReply.TokenCounts;
import java.util.List;

/**
 * A SGLang prefill worker: prefills the prompt through its radix (prefix) cache, registers each
 * {@code bootstrap_room} with its bootstrap listener for the decode, and answers in the form the
 * client asked for (SSE when it streamed) with the one token the prefill produces and its own,
 * truthful cached count (engines.md §4.1).
 */
final class SglangPrefillHandler implements CompletionHandler {
  private final WordTokenizer tokenizer = new WordTokenizer();
  private final PrefixCache cache;
  private final BootstrapServer bootstrap;

  SglangPrefillHandler(PrefixCache cache, BootstrapServer bootstrap) {
    this.cache = cache;
    this.bootstrap = bootstrap;
  }

  @Override
  public WorkerReply answer(RecordedRequest recorded) throws BadRequest {
    SglangRequest request = SglangRequest.parse(recorded.body(), tokenizer);
    int cached = cache.prefill(request.prompt());
    for (SglangRequest.Room room : request.rooms()) {
      bootstrap.register(room.id(), new PrefilledRoom(request.prompt().length, cached));
    }
    List<String> pieces = OpenAiWire.answerPieces(tokenizer, 1);
    return OpenAiWire.answer(
        OpenAiWire.Style.SGLANG, request.responseId(), request.model(), pieces, "length", request.prompt().length,
        cached, request.shape().capped(1), new TokenCounts(request.prompt().length, cached, request.shape().choices()));
  }
}
