package io.disaggusage.extproc.stream;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.testkit.ScenarioVectors.Vector;
import io.disaggusage.extproc.scenario.VectorRunner;
import io.disaggusage.extproc.testkit.Wire;
import io.disaggusage.extproc.sse.SseFramer;
import io.disaggusage.extproc.driver.Chunking;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The bad inputs that are too large for a committed corpus, through the whole state machine
 * with the fuzz property ({@link ExchangeStreamFuzzTest#checkGeneration}): multi-megabyte {@code data:}
 * lines and bodies, under the default limits and under small ones.
 */
class ExchangeBadInputsTest {
  static final int[] DEFAULTS = {16 * 1024 * 1024, 1024 * 1024};
  static final String USAGE = Wire.usage(101, 13, 101L);

  static Vector vector() {
    return ExchangeStreamFuzzTest.VECTORS.get(0);
  }

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void multiMegabyteDataLineAboveTheEventCapPassesUntouched() throws Exception {
    String line = "data: {\"choices\":[{\"delta\":{\"content\":\"" + "z".repeat(3 * 1024 * 1024) + "\"}}],\"usage\":" + USAGE + "}\n\n";
    byte[] body = utf8(Wire.chunk("a") + line + Wire.DONE);
    for (boolean generationFirst : new boolean[] {false, true}) {
      ExchangeStreamFuzzTest.checkGeneration(vector(), body, true, generationFirst, DEFAULTS, 7);
    }
    // The same through the state machine, read back: untouched and counted as oversize.
    var s = ExchangeStreamFuzzTest.Service.start(DEFAULTS[0], DEFAULTS[1]);
    Vector v = vector();
    var gen = new io.disaggusage.extproc.testkit.ScenarioVectors.Leg(
        v.generation().path(), v.generation().requestHeaders(), v.generation().cluster(), v.generation().requestBody(),
        "text/event-stream", body);
    var o = VectorRunner.run(s.envoy(), new Vector("big", v.order(), v.context(), gen, body),
        VectorRunner.Splits.generationOnly(Chunking.fixed(64 * 1024)));
    assertThat(o.problem()).isNull();
    assertThat(o.generation().clientBody()).isEqualTo(body);
    assertThat(o.generation().metadata("disagg_usage", "outcome")).isEqualTo("oversize");
  }

  @Test
  void multiMegabyteDataLineUnderALargerCapIsRewritten() throws Exception {
    String line = "data: {\"choices\":[{\"delta\":{\"content\":\"" + "z".repeat(2 * 1024 * 1024) + "\"}}],\"usage\":" + USAGE + "}\n\n";
    byte[] body = utf8(Wire.chunk("a") + line + Wire.DONE);
    ExchangeStreamFuzzTest.checkGeneration(vector(), body, true, false, new int[] {16 * 1024 * 1024, 4 * 1024 * 1024}, 11);
  }

  @Test
  void multiMegabyteJsonBodiesAroundTheCap() throws Exception {
    String big = "{\"content\":\"" + "q".repeat(5 * 1024 * 1024) + "\",\"usage\":" + USAGE + "}";
    ExchangeStreamFuzzTest.checkGeneration(vector(), utf8(big), false, false, DEFAULTS, 3);
    ExchangeStreamFuzzTest.checkGeneration(vector(), utf8(big), false, true, new int[] {1024 * 1024, 1024 * 1024}, 5);
  }

  @Test
  void controlBytesBomAndLineEndsThroughTheStateMachine() throws Exception {
    String stream = Wire.chunk("a") + Wire.usageChunk(USAGE) + Wire.DONE;
    List<byte[]> bodies =
        List.of(
            utf8(stream.replace("\n", "\r")),
            utf8("\uFEFF" + stream),
            utf8(stream.replace("\"a\"", "\"\u0000\"")),
            new byte[] {(byte) 0xFF, (byte) 0xFE, 0, '\n', '\n'},
            utf8(stream.substring(0, stream.length() - 30)));
    for (byte[] body : bodies) {
      for (int order = 0; order < 2; order++) {
        ExchangeStreamFuzzTest.checkGeneration(vector(), body, true, order == 1, DEFAULTS, 13);
        ExchangeStreamFuzzTest.checkGeneration(vector(), body, true, order == 1, new int[] {256, SseFramer.MIN_MAX_EVENT_BYTES}, 17);
      }
    }
  }
}
