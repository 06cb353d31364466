package io.disaggusage.extproc.tools.sandbox;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.disaggusage.extproc.emulator.engines.ClientRequest;
import io.disaggusage.extproc.emulator.engines.PrefixCache;
import io.disaggusage.extproc.emulator.engines.WordTokenizer;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The printed request and the numbers the banner promises for it. */
class SeedRequestTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  @Test
  void theNumbersTheBannerPrints() {
    // 101 prompt tokens like golden vector G6; the shared system prompt spans 4 full 16-token blocks,
    // the whole prompt 6 (the block holding the last token is always computed).
    assertThat(SeedRequest.expected()).isEqualTo(new SeedRequest.Expected(101, 64, 96));
  }

  @Test
  void theWarmUpPromptLeavesNothingInACache() throws Exception {
    for (boolean stream : new boolean[] {false, true}) {
      byte[] body = SeedRequest.warmUpJson(stream).getBytes(StandardCharsets.UTF_8);
      PrefixCache cache = new PrefixCache(PrefixCache.DEFAULT_BLOCK_TOKENS, 8);

      cache.prefill(new WordTokenizer().encodeChat(ClientRequest.fromJson(body, "m", 1).messages()));

      assertThat(cache.size()).isZero();
    }
  }

  @Test
  void theCurlLineSendsTheJsonAsAShellWouldSplitIt() throws Exception {
    String json = SeedRequest.json(SeedRequest.QUESTION, false);

    CurlLine line = CurlLine.parse(SeedRequest.curl(URI.create("http://127.0.0.1:18000/"), json));

    assertThat(line.url()).isEqualTo(URI.create("http://127.0.0.1:18000/v1/chat/completions"));
    assertThat(line.headers()).isEqualTo(Map.of("content-type", "application/json"));
    assertThat(line.body()).isEqualTo(json);
    JsonNode body = JSON.readTree(line.body());
    assertThat(body.path("messages").path(1).path("content").asText()).isEqualTo(SeedRequest.QUESTION);
    assertThat(body.has("stream")).isFalse();
    assertThat(JSON.readTree(SeedRequest.json(SeedRequest.QUESTION, true)).path("stream").asBoolean()).isTrue();
  }

  @Test
  void singleQuotesSurviveTheShellQuoting() {
    String text = "{\"content\":\"the prompt's KV cache, 'quoted'\"}";

    assertThat(CurlLine.shellWords("x " + SeedRequest.shellQuoted(text) + " y")).containsExactly("x", text, "y");
  }
}
