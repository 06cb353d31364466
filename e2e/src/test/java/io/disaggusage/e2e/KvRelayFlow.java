package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.disaggusage.e2e.Orchestrator.Answer;
import io.disaggusage.extproc.emulator.engines.PrefixCache;
import io.disaggusage.extproc.emulator.engines.UsageVariant;
import io.disaggusage.extproc.emulator.engines.VllmEngine;
import io.disaggusage.extproc.emulator.engines.WorkerCall;
import io.disaggusage.extproc.emulator.engines.WorkerReply;
import io.disaggusage.extproc.testkit.Wire;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * A vLLM ≥ 0.32 NIXL flow behind vLLM's toy proxy ({@link ProxyOrchestrator}), for hops that may give each leg
 * an {@code x-request-id} of their own. Two {@link Worker}s answer as the emulator's vLLM workers
 * ({@link VllmEngine}, vLLM 0.32's wire): the prefill's {@code kv_transfer_params.remote_request_id} is
 * {@code chatcmpl-<the x-request-id it received>-<8 hex>}, so it names whatever id the hop gave that leg, and the
 * decode reports the whole transferred prompt as cached, as vLLM 0.32 was measured to. The proxy relays the
 * prefill's params verbatim; that relayed handle is all the two legs share when the hop replaced the ids.
 */
final class KvRelayFlow {
  /** The client's request: the proxy caps it to one token for the prefill and relays the rest to the decode. */
  static final String CLIENT_REQUEST = "{\"model\":\"" + Wire.MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":"
      + "\"Name the capital of France and say why it became the capital, in one short paragraph of plain words.\"}],"
      + "\"max_tokens\":6,\"stream\":true,\"stream_options\":{\"include_usage\":true}}";

  /** Where a usage object holds its cached count (a JSON pointer). */
  static final String CACHED = "/prompt_tokens_details/cached_tokens";

  /** Both legs as the workers saw them, and what the client read. */
  record Result(RecordingHop.Exchange prefill, RecordingHop.Exchange decode, Answer client) {
    /**
     * The usage the client read, checked against the legs (RealFlowCheck: the prefill's prompt accounting, the rest
     * the decode's) and against the decode's own count, which the correction must have replaced.
     */
    JsonNode assertCorrected() {
      assertThat(client.status()).as(client.text()).isEqualTo(200);
      JsonNode read = RealFlowCheck.assertCorrected(prefill, decode, client.text(), true);
      assertThat(read.at(CACHED).asLong()).as("the prefill's count, not the decode's (the whole transferred prompt)")
          .isNotEqualTo(reported().at(CACHED).asLong());
      return read;
    }

    /** The decode worker's own usage: what it reported before any correction. */
    JsonNode reported() {
      List<JsonNode> usages = RealFlowCheck.usageObjects(decode.responseText(), true);
      return usages.get(usages.size() - 1);
    }

    /**
     * The decode request carries the prefill's {@code kv_transfer_params} verbatim, whose {@code remote_request_id}
     * names the prefill leg's {@code x-request-id}: the handle the service joins the legs by.
     */
    void assertRelayedTheHandle() {
      JsonNode returned = RouterClients.parseJson(prefill.responseText()).path("kv_transfer_params");
      JsonNode relayed = RouterClients.parseJson(decode.requestText()).path("kv_transfer_params");
      assertThat(relayed).as("the proxy relays the prefill's kv_transfer_params verbatim").isEqualTo(returned);
      assertThat(relayed.path("remote_request_id").asText()).as("vLLM 0.32 names the transfer after the prefill's x-request-id")
          .matches(java.util.regex.Pattern.quote("chatcmpl-" + prefill.requestId() + "-") + "[0-9a-f]{8}");
    }
  }

  private final VllmEngine engine = new VllmEngine(new PrefixCache(PrefixCache.DEFAULT_BLOCK_TOKENS, 4096), UsageVariant.WHOLE_PROMPT_BUG);
  private final List<RecordingHop.Exchange> prefills = Collections.synchronizedList(new ArrayList<>());
  private final List<RecordingHop.Exchange> decodes = Collections.synchronizedList(new ArrayList<>());

  /** Makes these workers answer as the flow's vLLM prefill and decode workers, whoever routes to them. */
  KvRelayFlow install(Worker context, Worker generation) {
    context.answer(request -> answer(request, engine::context, prefills));
    generation.answer(request -> answer(request, engine::generation, decodes));
    return this;
  }

  /** The client's request through {@code proxy}, and both legs it caused. */
  Result send(ProxyOrchestrator proxy) {
    int before = decodes.size();
    Answer client = Orchestrator.postAndWait(proxy.baseUrl() + "/v1/chat/completions", Map.of(),
        CLIENT_REQUEST.getBytes(StandardCharsets.UTF_8));
    assertThat(prefills).as("one prefill and one decode call per flow: " + client.text()).hasSize(before + 1);
    assertThat(decodes).hasSize(before + 1);
    return new Result(prefills.get(before), decodes.get(before), client);
  }

  /**
   * The engine's answer to the request the worker received, headers as they arrived (the id the hop set), written
   * in paced chunks as {@link VectorFlow} writes a leg; the exchange recorded.
   */
  private static Worker.Reply answer(Worker.Received request, Function<WorkerCall, WorkerReply> leg, List<RecordingHop.Exchange> log) {
    WorkerReply reply = leg.apply(new WorkerCall(request.path(), request.headers(), request.body()));
    log.add(new RecordingHop.Exchange(request.path(), request.header("x-request-id"), request.body(), reply.status(),
        reply.contentType(), reply.body()));
    Worker.Reply paced = Worker.Reply.paced(reply.contentType(), reply.body(), VectorFlow.PIECES, VectorFlow.PAUSE);
    return reply.status() == 200 ? paced
        : new Worker.Reply(reply.status(), reply.contentType(), paced.chunks(), Duration.ZERO, Duration.ZERO);
  }
}
