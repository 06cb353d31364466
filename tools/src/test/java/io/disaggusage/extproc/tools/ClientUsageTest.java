package io.disaggusage.extproc.tools;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class ClientUsageTest {
  private static final String USAGE =
      "{\"prompt_tokens\":10,\"total_tokens\":13,\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":8}}";

  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void readsAJsonBody() {
    assertThat(ClientUsage.read(utf8(" {\"id\":\"x\",\"usage\":" + USAGE + "}")))
        .contains(new ClientUsage(10, 8, 3, 13));
  }

  @Test
  void readsTheLastUsageOfAStreamWhateverTheLineEnds() {
    String stream =
        "data: {\"choices\":[],\"usage\":" + USAGE.replace("\"cached_tokens\":8", "\"cached_tokens\":1") + "}\r\n\r\n"
            + "data:{\"choices\":[],\"usage\":" + USAGE + "}\r\n\r\n"
            + "data: [DONE]\r\n\r\n";
    assertThat(ClientUsage.read(utf8(stream))).contains(new ClientUsage(10, 8, 3, 13));
  }

  @Test
  void missingDetailsAndMissingUsage() {
    assertThat(ClientUsage.read(utf8("{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}")))
        .contains(new ClientUsage(1, -1, 1, 2));
    assertThat(ClientUsage.read(utf8("{\"usage\":null}"))).isEmpty();
    assertThat(ClientUsage.read(utf8("data: {\"choices\":[]}\n\ndata: [DONE]\n\n"))).isEmpty();
    assertThat(ClientUsage.read(utf8("{ truncated"))).isEmpty();
  }
}
