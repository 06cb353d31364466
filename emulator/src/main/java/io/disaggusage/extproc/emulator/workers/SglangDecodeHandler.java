package io.disaggusage.extproc.emulator.workers;

import io.disaggusage.extproc.emulator.engines.BadRequest;
import io.disaggusage.extproc.emulator.engines.OpenAiWire;
import io.disaggusage.extproc.emulator.engines.PrefixCache;
import io.disaggusage.extproc.emulator.engines.UsageVariant;
import io.disaggusage.extproc.emulator.engines.WordTokenizer;
import io.disaggusage.extproc.emulator.engines.WorkerReply;
import io.disaggusage.extproc.emulator.engines.WorkerReply.TokenCounts;
import java.util.List;

/**
 * A SGLang decode worker: fetches each room's KV handover from the prefill at the request's
 * {@code bootstrap_host:bootstrap_port} (HTTP 500 with a JSON error when that fails, as a failed KV
 * transfer aborts the request), then answers with the prefill's cached count ({@link UsageVariant#FIXED},
 * SGLang's normal behaviour) or, with {@link UsageVariant#BUG}, that count plus its own radix-cache hit
 * ({@code --disaggregation-decode-enable-radix-cache}, #25972: doubles on a repeated prompt and can
 * exceed {@code prompt_tokens}).
 */
final class SglangDecodeHandler implements CompletionHandler {
  private final WordTokenizer tokenizer = new WordTokenizer();
  private final BootstrapClient bootstrap = new BootstrapClient();
  private final PrefixCache decodeRadix;
  private final UsageVariant variant;

  SglangDecodeHandler(PrefixCache decodeRadix, UsageVariant variant) {
    this.decodeRadix = decodeRadix;
    this.variant = variant;
  }

  @Override
  public WorkerReply answer(RecordedRequest recorded) throws BadRequest {
    SglangRequest request = SglangRequest.parse(recorded.body(), tokenizer);
    for (SglangRequest.Room room : request.rooms()) {
      if (room.host() == null || room.port() == null) {
        throw new BadRequest("bootstrap_host and bootstrap_port: a decode worker needs the prefill's bootstrap address");
      }
    }
    PrefilledRoom prefilled = null;
    try {
      for (SglangRequest.Room room : request.rooms()) {
        prefilled = bootstrap.fetch(room.host(), room.port(), room.id());
      }
    } catch (BootstrapClient.HandoverFailed e) {
      return BootstrapServer.error(500, e.getMessage());
    }
    int prompt = request.prompt().length;
    long cached = prefilled.cachedTokens();
    if (variant == UsageVariant.BUG) {
      cached += decodeRadix.prefill(request.prompt());
    }
    List<String> pieces = OpenAiWire.answerPieces(tokenizer, request.shape().maxTokens());
    return OpenAiWire.answer(
        OpenAiWire.Style.SGLANG, request.responseId(), request.model(), pieces,
        OpenAiWire.finishReason(tokenizer, pieces.size()), prompt, cached, request.shape(),
        new TokenCounts(prompt, prefilled.cachedTokens(), (long) pieces.size() * request.shape().choices()));
  }
}
