package io.disaggusage.extproc.emulator.envoy;

import io.disaggusage.extproc.driver.Chunking;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.bodyText;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.pass;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.replaceBody;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.REQUEST_BODY;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.REQUEST_HEADERS;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.RESPONSE_BODY;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.RESPONSE_HEADERS;
import static org.assertj.core.api.Assertions.assertThat;

import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import java.util.Locale;
import org.junit.jupiter.api.Test;

/** Concurrent exchanges, gates, and interleaved directions (items 1, 7). */
class FakeEnvoyConcurrencyTest extends FakeEnvoyTestSupport {

  /** Tags every response chunk with the request id it belongs to. */
  private static ScriptedProcessor tagger() {
    return new ScriptedProcessor((req, s) -> {
      if (req.hasRequestHeaders()) {
        req.getRequestHeaders().getHeaders().getHeadersList().stream()
            .filter(h -> h.getKey().equals("x-request-id"))
            .findFirst()
            .ifPresent(h -> s.state.put("id", h.getRawValue().toStringUtf8()));
      }
      s.reply(req.hasResponseBody()
          ? replaceBody(req, s.state.get("id") + ":" + bodyText(req).toUpperCase(Locale.ROOT))
          : pass(req));
    });
  }

  @Test
  void generationCompletesWhileContextResponseBodyIsHeldBack() throws Exception {
    ScriptedProcessor server = tagger();
    FakeEnvoy envoy = envoy(server,
        withModes(BodySendMode.NONE, BodySendMode.STREAMED).build(), EnvoyProfile.V1_37);

    ExchangeHandle context = envoy.start(Exchange.post("/v1/completions", "{\"ctx\":1}").name("context")
        .requestHeader("x-request-id", "A").responseBody("ctx").gateResponseBody().build());
    context.awaitResponseHeadersForwarded();

    ExchangeResult generation = envoy.execute(Exchange.post("/v1/completions", "{\"gen\":1}").name("generation")
        .requestHeader("x-request-id", "B").responseBody("gen").build());
    assertThat(generation.clientResponse().bodyUtf8()).isEqualTo("B:GEN");
    assertThat(context.result()).isNotDone();

    ExchangeResult ctx = context.releaseResponseBody().awaitResult();
    assertThat(ctx.clientResponse().bodyUtf8()).isEqualTo("A:CTX");
    assertThat(server.streams()).hasSize(2);
    assertThat(envoy.stats().streamsStarted()).isEqualTo(2);
  }

  @Test
  void chunkGatesControlPacing() throws Exception {
    FakeEnvoy envoy = envoy(tagger(), withModes(BodySendMode.NONE, BodySendMode.STREAMED).build(), EnvoyProfile.V1_36);

    ExchangeHandle h = envoy.start(Exchange.post("/x", "{}").requestHeader("x-request-id", "C")
        .responseBody("aabbcc").responseChunking(Chunking.fixed(2)).gateResponseBody().build());
    h.releaseResponseChunk();
    assertThat(h.awaitClientBodyContaining("C:AA")).isEqualTo("C:AA");
    // An ungated second chunk would have been sent as soon as the first was delivered, before its
    // reply could come back; with the gate closed only the first went to the processor.
    assertThat(h.messagesSentSoFar().stream().filter(ProcessingRequest::hasResponseBody)).hasSize(1);
    assertThat(new String(h.clientBodySoFar())).isEqualTo("C:AA");
    h.releaseResponseChunk();
    h.awaitClientBodyContaining("C:BB");
    ExchangeResult r = h.releaseResponseBody().awaitResult();
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("C:AAC:BBC:CC");
  }

  @Test
  void responseHeadersMessageInterleavesWithOutstandingRequestChunks() throws Exception {
    FakeEnvoy envoy = passThroughEnvoy(withModes(BodySendMode.STREAMED, BodySendMode.STREAMED).build());

    ExchangeHandle h = envoy.start(Exchange.post("/x", "r1r2r3")
        .requestChunking(Chunking.fixed(2)).gateRequestBody()
        .interleaveDirections()
        .responseBody("resp").gateResponseHeaders().build());
    h.releaseRequestChunk();
    h.awaitMessagesSent(2); // request headers + first request chunk
    h.releaseResponseHeaders();
    h.awaitResponseHeadersForwarded(); // while request chunks 2 and 3 are still held downstream
    h.releaseRequestBody();
    ExchangeResult r = h.awaitResult();

    assertThat(cases(r.messagesSent())).startsWith(REQUEST_HEADERS, REQUEST_BODY, RESPONSE_HEADERS);
    assertThat(cases(r.messagesSent())).contains(RESPONSE_BODY);
    assertThat(r.upstreamRequest().bodyUtf8()).isEqualTo("r1r2r3");
    assertThat(r.clientResponse().bodyUtf8()).isEqualTo("resp");
  }

  @Test
  void manyConcurrentExchangesKeepTheirStateSeparate() throws Exception {
    FakeEnvoy envoy = envoy(tagger(), withModes(BodySendMode.NONE, BodySendMode.STREAMED).build(), EnvoyProfile.V1_37);

    var handles = java.util.stream.IntStream.range(0, 20)
        .mapToObj(i -> envoy.start(Exchange.post("/x", "{}").requestHeader("x-request-id", "id" + i)
            .responseBody("ab".repeat(5)).responseChunking(Chunking.random(i, 3)).build()))
        .toList();
    for (int i = 0; i < handles.size(); i++) {
      String body = handles.get(i).awaitResult().clientResponse().bodyUtf8();
      assertThat(body.replace("id" + i + ":", "")).isEqualTo("AB".repeat(5));
    }
    assertThat(envoy.stats().streamsStarted()).isEqualTo(20);
  }
}
