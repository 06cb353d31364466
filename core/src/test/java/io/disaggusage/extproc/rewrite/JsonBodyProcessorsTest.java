package io.disaggusage.extproc.rewrite;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.usage.ApiShapes;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.JsonUsageRewriter;
import io.disaggusage.extproc.usage.UsageDocument;
import java.io.ByteArrayOutputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Non-streaming generation rewrite and context observation, as processors fed in chunks. */
class JsonBodyProcessorsTest {
  static final com.fasterxml.jackson.core.JsonFactory JSON = UsageDocument.newFactory(1 << 20);
  static final ContextUsage CTX =
      new ContextUsage(BigInteger.valueOf(101), Map.of("cached_tokens", "7"), BigInteger.valueOf(7));
  static final String GEN =
      "{\"id\":\"x\",\"model\":\"m\",\"usage\":{\"prompt_tokens\":101,\"completion_tokens\":13,\"total_tokens\":114,\"prompt_tokens_details\":{\"cached_tokens\":101}}}";

  static GenerationJsonRewriter generation(int maxBody) {
    return new GenerationJsonRewriter(new JsonUsageRewriter(JSON, 65536), ApiShapes.CHAT, maxBody);
  }

  static String feed(ResponseBodyProcessor p, String body, int chunk) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    for (int i = 0; i < b.length; i += chunk) {
      p.accept(java.util.Arrays.copyOfRange(b, i, Math.min(b.length, i + chunk)));
      out.writeBytes(p.takeReady());
    }
    p.finish();
    out.writeBytes(p.takeReady());
    return out.toString(StandardCharsets.UTF_8);
  }

  @Test
  void rewrittenAtTheEndWhateverTheChunking() {
    for (int chunk = 1; chunk <= GEN.length(); chunk += 5) {
      GenerationJsonRewriter p = generation(1 << 20);
      p.resolveContext(CTX, null);
      assertThat(feed(p, GEN, chunk)).isEqualTo(GEN.replace("\"cached_tokens\":101", "\"cached_tokens\":7"));
      assertThat(p.report().outcome()).isEqualTo(Outcome.REWRITTEN);
      assertThat(p.report().model()).isEqualTo("m");
    }
  }

  @Test
  void concurrentFlowForwardsWhatPrecedesUsageAndWaitsAtTheEndOfTheBody() {
    GenerationJsonRewriter p = generation(1 << 20);
    int usage = GEN.indexOf("{\"prompt_tokens\"");
    p.accept(GEN.getBytes(StandardCharsets.UTF_8));
    assertThat(new String(p.takeReady(), StandardCharsets.UTF_8)).isEqualTo(GEN.substring(0, usage));
    assertThat(p.heldBytes()).isEqualTo(GEN.length() - usage);
    assertThat(p.wantsContext()).isFalse();
    p.finish();
    assertThat(p.wantsContext()).isTrue();
    assertThat(p.waiting()).isTrue();
    assertThat(p.takeReady()).isEmpty();
    p.resolveContext(CTX, null);
    assertThat(new String(p.takeReady(), StandardCharsets.UTF_8))
        .isEqualTo(GEN.substring(usage).replace("\"cached_tokens\":101", "\"cached_tokens\":7"));
    assertThat(p.waiting()).isFalse();
    assertThat(p.heldBytes()).isZero();
  }

  @Test
  void timeoutPassesTheBodyThroughWithTheWorkersFigures() {
    GenerationJsonRewriter p = generation(1 << 20);
    p.accept(GEN.getBytes(StandardCharsets.UTF_8));
    p.finish();
    p.resolveContext(null, Outcome.CONTEXT_TIMEOUT);
    assertThat(new String(p.takeReady(), StandardCharsets.UTF_8)).isEqualTo(GEN);
    assertThat(p.report().outcome()).isEqualTo(Outcome.CONTEXT_TIMEOUT);
    assertThat(p.report().figures().cached()).isEqualTo(BigInteger.valueOf(101));
  }

  @Test
  void oversizeBodyIsReleasedUnmodifiedAsSoonAsItCrossesTheCap() {
    GenerationJsonRewriter p = generation(50);
    p.resolveContext(CTX, null);
    assertThat(feed(p, GEN, 40)).isEqualTo(GEN);
    assertThat(p.report().outcome()).isEqualTo(Outcome.OVERSIZE);
  }

  @Test
  void malformedBodyPassesThroughAndIsCounted() {
    GenerationJsonRewriter p = generation(1 << 20);
    p.resolveContext(CTX, null);
    String bad = GEN.substring(0, GEN.length() - 1);
    assertThat(feed(p, bad, 9)).isEqualTo(bad);
    assertThat(p.report().outcome()).isEqualTo(Outcome.PARSE_ERROR);
  }

  @Test
  void abandonReturnsHeldBytes() {
    GenerationJsonRewriter p = generation(1 << 20);
    int usage = GEN.indexOf("{\"prompt_tokens\"");
    p.accept(GEN.substring(0, usage + 20).getBytes(StandardCharsets.UTF_8));
    assertThat(new String(p.takeReady(), StandardCharsets.UTF_8)).isEqualTo(GEN.substring(0, usage));
    assertThat(new String(p.abandon(), StandardCharsets.UTF_8)).isEqualTo(GEN.substring(usage, usage + 20));
  }

  @Test
  void contextObserverForwardsEveryChunkAndReadsUsageAndIds() {
    String ctx =
        "{\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"finish_reason\":\"length\",\"disaggregated_params\":"
            + "{\"request_type\":\"context_only\",\"ctx_request_id\":18446744073709551615,\"disagg_request_id\":2748779069441234567}}],"
            + "\"usage\":{\"prompt_tokens\":101,\"completion_tokens\":1,\"total_tokens\":102,\"prompt_tokens_details\":{\"cached_tokens\":7}}}";
    ContextJsonObserver o = new ContextJsonObserver(JSON, 1 << 20);
    byte[] b = ctx.getBytes(StandardCharsets.UTF_8);
    o.accept(java.util.Arrays.copyOfRange(b, 0, 30));
    assertThat(o.takeReady()).hasSize(30);
    o.accept(java.util.Arrays.copyOfRange(b, 30, b.length));
    assertThat(o.takeReady()).hasSize(b.length - 30);
    o.finish();
    assertThat(o.observation().outcome()).isEqualTo(Outcome.STORED);
    assertThat(o.observation().usage()).isEqualTo(CTX);
    assertThat(o.observation().contextIds()).containsExactly("18446744073709551615", "2748779069441234567");
  }

  @Test
  void contextObserverReadsTheKvTransferHandleOfAVllmPrefillResponse() {
    // vLLM 0.32's prefill answer: kv_transfer_params after usage, remote_request_id among them.
    String ctx =
        "{\"id\":\"chatcmpl-r\",\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":101,\"completion_tokens\":1,"
            + "\"total_tokens\":102,\"prompt_tokens_details\":{\"cached_tokens\":7}},\"prompt_logprobs\":null,"
            + "\"kv_transfer_params\":{\"do_remote_prefill\":true,\"do_remote_decode\":false,\"remote_block_ids\":[[1]],"
            + "\"remote_engine_id\":\"e\",\"remote_request_id\":\"chatcmpl-r-0a1b2c3d\",\"remote_host\":\"h\","
            + "\"remote_port\":5600,\"tp_size\":1},\"ec_transfer_params\":null}";
    assertThat(ContextJsonObserver.observe(JSON, ctx.getBytes(StandardCharsets.UTF_8)))
        .extracting(ContextObservation::outcome, ContextObservation::kvRemoteRequestId)
        .containsExactly(Outcome.STORED, "chatcmpl-r-0a1b2c3d");
    for (String params : List.of("null", "{\"remote_request_id\":null}", "{\"remote_request_id\":5}", "[\"x\"]")) {
      String other = "{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1},\"kv_transfer_params\":" + params + "}";
      assertThat(ContextJsonObserver.observe(JSON, other.getBytes(StandardCharsets.UTF_8)).kvRemoteRequestId())
          .as(params)
          .isNull();
    }
    // Only the root's params name the transfer.
    String nested = "{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1},\"x\":{\"kv_transfer_params\":{\"remote_request_id\":\"a\"}}}";
    assertThat(ContextJsonObserver.observe(JSON, nested.getBytes(StandardCharsets.UTF_8)).kvRemoteRequestId()).isNull();
  }

  @Test
  void contextObserverSettlesWhenTheRootObjectClosesNotAtTheEndOfTheBody() {
    String ctx = "{\"id\":\"c\",\"usage\":{\"prompt_tokens\":101,\"prompt_tokens_details\":{\"cached_tokens\":7}}}";
    for (int cut = 1; cut < ctx.length(); cut++) {
      ContextJsonObserver o = new ContextJsonObserver(JSON, 1 << 20);
      o.accept(ctx.substring(0, cut).getBytes(StandardCharsets.UTF_8));
      assertThat(o.contentEnded()).as("after %d bytes", cut).isFalse();
      o.accept(ctx.substring(cut).getBytes(StandardCharsets.UTF_8));
      assertThat(o.contentEnded()).isTrue();
      assertThat(o.observation().usage()).isEqualTo(CTX);
      o.accept(" \n".getBytes(StandardCharsets.UTF_8)); // whitespace after the root object
      o.finish();
      assertThat(o.observation().outcome()).isEqualTo(Outcome.STORED);
    }
    // A body that does not close its root object is read at its end, as before.
    ContextJsonObserver cut = new ContextJsonObserver(JSON, 1 << 20);
    cut.accept(ctx.substring(0, ctx.length() - 1).getBytes(StandardCharsets.UTF_8));
    cut.finish();
    assertThat(cut.contentEnded()).isFalse();
    assertThat(cut.observation().outcome()).isEqualTo(Outcome.PARSE_ERROR);
  }

  @Test
  void contextSseObserverSettlesAtTheStreamsLastEvent() {
    String usage = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":101,\"prompt_tokens_details\":{\"cached_tokens\":7}}}\n\n";
    ContextSseObserver o = new ContextSseObserver(JSON, 1 << 16);
    o.accept(usage.getBytes(StandardCharsets.UTF_8));
    assertThat(o.contentEnded()).isFalse(); // a later usage event would still win
    o.accept("data: [DONE]\n".getBytes(StandardCharsets.UTF_8));
    assertThat(o.contentEnded()).isFalse();
    o.accept("\n".getBytes(StandardCharsets.UTF_8));
    assertThat(o.contentEnded()).isTrue();
    assertThat(o.observation().usage()).isEqualTo(CTX);
    ContextSseObserver messages = new ContextSseObserver(JSON, 1 << 16);
    messages.accept("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".getBytes(StandardCharsets.UTF_8));
    assertThat(messages.contentEnded()).isTrue();
  }

  @Test
  void contextSseObserverKeepsTheLastUsage() {
    String stream =
        "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n"
            + "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":101,\"completion_tokens\":1,\"total_tokens\":102,\"prompt_tokens_details\":{\"cached_tokens\":7}}}\n\n"
            + "data: [DONE]\n\n";
    ContextSseObserver o = new ContextSseObserver(JSON, 1 << 16);
    assertThat(feed(o, stream, 11)).isEqualTo(stream);
    assertThat(o.observation().usage()).isEqualTo(CTX);
  }
}
