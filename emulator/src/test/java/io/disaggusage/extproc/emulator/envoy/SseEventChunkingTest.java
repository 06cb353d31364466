package io.disaggusage.extproc.emulator.envoy;

import io.disaggusage.extproc.driver.Chunking;
import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** {@link Chunking#sseEvents()}: one chunk per event, whatever the line ends, nothing lost. */
class SseEventChunkingTest {

  private static List<String> split(String body) {
    return Chunking.sseEvents().split(body.getBytes(StandardCharsets.UTF_8)).stream()
        .map(c -> new String(c, StandardCharsets.UTF_8))
        .toList();
  }

  @ParameterizedTest
  @ValueSource(strings = {"\n", "\r\n", "\r"})
  void cutsAfterTheBlankLineThatEndsEachEvent(String eol) {
    String a = "event: x" + eol + "data: {\"a\":1}" + eol + eol;
    String b = "data: {\"b\":2}" + eol + eol;
    String done = "data: [DONE]" + eol + eol;
    assertThat(split(a + b + done)).containsExactly(a, b, done);
  }

  @Test
  void trailingBytesOfAnUnfinishedEventFormTheLastChunk() {
    assertThat(split("data: 1\n\ndata: 2\n")).containsExactly("data: 1\n\n", "data: 2\n");
    assertThat(split("data: 1")).containsExactly("data: 1");
  }

  @Test
  void trtLlmSpaceBeforeTheBlankLineAndMixedLineEnds() {
    String first = "data: {\"x\":1} \n\n";
    String second = "data: {\"y\":2}\r\n\r\n";
    assertThat(split(first + second)).containsExactly(first, second);
  }

  @Test
  void extraBlankLinesStayWithTheNextEventAndEmptyBodyHasNoChunk() {
    assertThat(split("\n\ndata: 1\n\n")).containsExactly("\n\ndata: 1\n\n");
    assertThat(split("")).isEmpty();
  }

  @Test
  void aJsonBodyWithoutBlankLinesIsOneChunk() {
    assertThat(split("{\"usage\":{}}\n")).containsExactly("{\"usage\":{}}\n");
  }
}
