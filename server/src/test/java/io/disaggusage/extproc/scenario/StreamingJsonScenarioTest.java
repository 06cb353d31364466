package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.OpenAiClientView;
import io.disaggusage.extproc.testkit.Wire;
import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.testkit.OpenAiClientView.ClientUsage;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeHandle;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * A non-streaming (JSON) generation response through the fake Envoy, released chunk by chunk: the
 * bytes before the usage object reach the client while the body is still coming (and, in a
 * concurrent flow, while the context usage is awaited); the corrected usage follows at the end.
 */
class StreamingJsonScenarioTest {
  static final String PATH = "/v1/chat/completions";
  static final String CTX_REQ = "{\"model\":\"m\",\"kv_transfer_params\":{\"do_remote_decode\":true}}";
  static final String GEN_REQ = "{\"model\":\"m\",\"kv_transfer_params\":{\"do_remote_prefill\":true}}";

  /** A chat completion with a long answer, so the part before usage is most of the body. */
  static String body(String usage) {
    return Wire.chatCompletion("s", usage).replace("Paris is the capital.", "Paris is the capital. ".repeat(200) + "End.");
  }

  static Exchange.Builder generation(String id, String body, Chunking chunking) {
    return Exchange.post(PATH, GEN_REQ)
        .requestHeader("x-request-id", id)
        .responseHeader("content-type", "application/json")
        .responseBody(body)
        .responseContentLength()
        .responseChunking(chunking)
        .gateResponseBody();
  }

  static ExchangeResult context(ServiceUnderTest s, String id) {
    return Flows.run(
        s.envoy,
        Exchange.post(PATH, CTX_REQ)
            .requestHeader("x-request-id", id)
            .responseHeader("content-type", "application/json")
            .responseBody(Wire.chatCompletion("c", Wire.usage(50, 1, 10L))));
  }

  @Test
  void bytesBeforeUsageReachTheClientBeforeTheBodyEnds() throws Exception {
    try (ServiceUnderTest s = new ServiceUnderTest(ServiceUnderTest.testConfig())) {
      assertClean(context(s, "stream-json"));
      String body = body(Wire.usage(50, 4, 50L));
      int usage = body.indexOf("\"usage\":");
      int[] cuts = {usage / 3, 2 * usage / 3, usage + 20};
      ExchangeHandle gen = s.envoy.start(generation("stream-json", body, Chunking.at(cuts)).build());
      gen.awaitResponseHeadersForwarded();
      gen.releaseResponseChunk();
      assertThat(gen.awaitClientBodyContaining(body.substring(cuts[0] - 10, cuts[0]))).isEqualTo(body.substring(0, cuts[0]));
      gen.releaseResponseChunk();
      byte[] two = gen.awaitClientBody(b -> b.length >= cuts[1]); // the text repeats: wait for the length
      assertThat(new String(two, StandardCharsets.UTF_8)).isEqualTo(body.substring(0, cuts[1]));
      // The chunk that starts the usage object: what precedes the object goes out, the object is held.
      gen.releaseResponseChunk();
      String upToUsage = body.substring(0, usage + "\"usage\":".length());
      assertThat(gen.awaitClientBodyContaining("\"usage\":")).isEqualTo(upToUsage);
      assertThat(gen.result()).isNotDone();
      gen.releaseResponseBody();
      ExchangeResult r = gen.awaitResult();
      assertClean(r);
      String expected = body.replace("{\"cached_tokens\":50}", "{\"cached_tokens\":10}");
      assertThat(r.clientResponse().bodyUtf8()).isEqualTo(expected);
      assertThat(OpenAiClientView.chatCompletion(r.clientResponse().bodyUtf8())).isEqualTo(new ClientUsage(50, 10L, 4, 54));
      assertThat(r.accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("rewritten");
      assertThat(r.accessLog("%DYNAMIC_METADATA(disagg_usage:cached_tokens)%")).isEqualTo("10");
    }
  }

  @Test
  void concurrentFlowForwardsWhatPrecedesUsageWhileItWaitsForTheContext() throws Exception {
    try (ServiceUnderTest s = new ServiceUnderTest(ServiceUnderTest.testConfig(Duration.ofMillis(2500)))) {
      String body = body(Wire.usage(50, 4, 50L));
      int usage = body.indexOf("\"usage\":");
      ExchangeHandle gen =
          s.envoy.start(
              generation("json-concurrent", body, Chunking.fixed(700).withEmptyFinalChunk())
                  .requestHeader("x-disagg-order", "concurrent")
                  .build());
      gen.awaitResponseHeadersForwarded();
      gen.releaseResponseBody();
      String upToUsage = body.substring(0, usage + "\"usage\":".length());
      assertThat(gen.awaitClientBodyContaining("\"usage\":")).isEqualTo(upToUsage);
      assertThat(gen.result()).isNotDone();
      assertClean(context(s, "json-concurrent"));
      ExchangeResult r = gen.awaitResult();
      assertClean(r);
      assertThat(r.clientResponse().bodyUtf8()).isEqualTo(body.replace("{\"cached_tokens\":50}", "{\"cached_tokens\":10}"));
      assertThat(r.accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%")).isEqualTo("rewritten");
      assertThat(s.store.waiters()).isZero();
      assertThat(new String(gen.clientBodySoFar(), StandardCharsets.UTF_8)).isEqualTo(r.clientResponse().bodyUtf8());
    }
  }
}
