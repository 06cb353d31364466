package io.disaggusage.extproc.emulator.envoy;

import io.disaggusage.extproc.driver.Chunking;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.bodyText;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.pass;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.replaceBody;
import static org.assertj.core.api.Assertions.assertThat;

import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import org.junit.jupiter.api.Test;

/**
 * Rewriting a request body in STREAMED mode turned on by {@code mode_override} in the request-headers
 * reply (envoy-ext-proc.md §3.4, §4): replacements of any length reach the upstream in order, bytes held
 * back ride on a later chunk's reply, the {@code content-length} Envoy saw stays on the forwarded
 * request unless the server removes it in that same reply, and bytes held for the end of a body that
 * ends with trailers are lost.
 */
class FakeEnvoyRequestRewriteTest extends FakeEnvoyTestSupport {
  private static final ProcessingMode STREAM_REQUEST =
      ProcessingMode.newBuilder().setRequestBodyMode(BodySendMode.STREAMED).build();

  /**
   * Holds back the last byte of every request chunk and sends it, plus a marker, with the reply to
   * the next chunk; the end-of-stream reply flushes and adds {@code +}.
   */
  private static ScriptedProcessor holdingRewriter(boolean removeContentLength) {
    StringBuilder held = new StringBuilder();
    return new ScriptedProcessor((req, s) -> {
      if (req.hasRequestHeaders()) {
        s.reply(ExtProcReplies.switchMode(req, STREAM_REQUEST, removeContentLength));
      } else if (req.hasRequestBody()) {
        String all = held + bodyText(req);
        held.setLength(0);
        if (req.getRequestBody().getEndOfStream()) {
          s.reply(replaceBody(req, all + "+"));
        } else {
          held.append(all.isEmpty() ? "" : all.substring(all.length() - 1));
          s.reply(replaceBody(req, all.isEmpty() ? "" : all.substring(0, all.length() - 1)));
        }
      } else {
        s.reply(pass(req));
      }
    });
  }

  private ExchangeResult run(ScriptedProcessor server, Exchange.Builder exchange) throws Exception {
    FakeEnvoy envoy = envoy(server, baseline().setAllowModeOverride(true).build(), EnvoyProfile.V1_37);
    return envoy.execute(exchange.responseBody("ok").build());
  }

  @Test
  void heldBytesRideOnLaterRepliesAndKeptContentLengthMismatches() throws Exception {
    ExchangeResult r = run(holdingRewriter(false),
        Exchange.post("/v1/chat/completions", "0123456789").requestChunking(Chunking.at(3, 6)));

    assertThat(r.upstreamRequest().bodyUtf8()).isEqualTo("0123456789+");
    assertThat(r.upstreamRequest().headers().get("content-length")).contains("10");
    assertThat(r.upstreamRequest().contentLengthMismatch()).isTrue();
  }

  @Test
  void removingContentLengthInTheHeadersReplyKeepsTheRequestConsistent() throws Exception {
    ExchangeResult r = run(holdingRewriter(true),
        Exchange.post("/v1/chat/completions", "0123456789").requestChunking(Chunking.bytewise()));

    assertThat(r.upstreamRequest().bodyUtf8()).isEqualTo("0123456789+");
    assertThat(r.upstreamRequest().headers().contains("content-length")).isFalse();
    assertThat(r.upstreamRequest().contentLengthMismatch()).isFalse();
    assertThat(r.upstreamRequest().complete()).isTrue();
  }

  @Test
  void withTrailersNoBodyMessageEndsTheStreamSoBytesHeldForTheEndAreLost() throws Exception {
    ExchangeResult r = run(holdingRewriter(true),
        Exchange.post("/v1/chat/completions", "0123456789").requestChunking(Chunking.at(5))
            .requestTrailer("x-checksum", "1"));

    assertThat(r.messagesSent().stream().filter(m -> m.hasRequestBody())
        .noneMatch(m -> m.getRequestBody().getEndOfStream())).isTrue();
    assertThat(r.upstreamRequest().bodyUtf8()).isEqualTo("012345678");
  }
}
