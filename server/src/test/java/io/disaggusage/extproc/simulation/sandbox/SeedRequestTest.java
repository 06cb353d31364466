package io.disaggusage.extproc.simulation.sandbox;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.net.URI;
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
