package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.e2e.Orchestrator.Answer;
import io.disaggusage.extproc.testkit.Wire;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Generation bodies no engine should send, through real Envoy to a service that holds context usage for
 * the flow: random bytes, 200 000-deep nesting, invalid UTF-8, a 6 MiB SSE event, NUL bytes and a BOM.
 * The client must get every byte in order with status 200 — unchanged, or with only the usage values
 * corrected where the rest of the body is readable — and the service must still correct the next flow.
 */
class HostileBodiesTest {
  private static final Stacks STACKS = new Stacks("hostile", 1);
  private static final String WRONG = Wire.usage(VllmWorkers.PROMPT, 2, (long) VllmWorkers.PROMPT);
  private static final String RIGHT = Wire.usage(VllmWorkers.PROMPT, 2, (long) VllmWorkers.CACHED);

  record Body(String name, String contentType, byte[] bytes) {
    @Override
    public String toString() {
      return name;
    }
  }

  static List<Body> bodies() {
    Random random = new Random(14);
    byte[] noise = new byte[256 * 1024];
    random.nextBytes(noise);
    String deep = "{\"choices\":[],\"x\":" + "[".repeat(200_000) + "]".repeat(200_000) + ",\"usage\":" + WRONG + "}";
    byte[] invalidUtf8 = concat(utf8("{\"choices\":[{\"message\":{\"content\":\""), new byte[] {(byte) 0xff, (byte) 0xc3, 0x28},
        utf8("\"}}],\"usage\":" + WRONG + "}"));
    String huge = "data: {\"choices\":[{\"delta\":{\"content\":\"" + "x".repeat(6 * 1024 * 1024) + "\"}}]}\n\n"
        + Wire.usageChunk(WRONG) + Wire.DONE;
    byte[] nulAndBom = concat(new byte[] {(byte) 0xef, (byte) 0xbb, (byte) 0xbf},
        utf8(Wire.chunk("a\u0000b").replace("a\\u0000b", "a\u0000b") + Wire.usageChunk(WRONG) + Wire.DONE));
    return List.of(
        new Body("random bytes as JSON", "application/json", noise),
        new Body("random bytes as SSE", "text/event-stream", noise),
        new Body("200 000-deep nesting", "application/json", utf8(deep)),
        new Body("invalid UTF-8", "application/json", invalidUtf8),
        new Body("a 6 MiB SSE event", "text/event-stream", utf8(huge)),
        new Body("NUL bytes and a BOM", "text/event-stream", nulAndBom));
  }

  static Stream<Arguments> cases() {
    return Tools.perRelease(bodies());
  }

  @AfterAll
  static void stop() {
    STACKS.close();
  }

  @ParameterizedTest(name = "Envoy {0}: {1}")
  @MethodSource("cases")
  void hostileGenerationBodyReachesTheClientWhole(String release, Body body) {
    Stack stack = STACKS.get(release);
    stack.context.answer(VllmWorkers::prefill);
    stack.generation.answer(request -> Worker.Reply.paced(body.contentType(), body.bytes(), 16, Duration.ofMillis(1)));
    String id = "hostile-" + System.nanoTime();

    assertThat(VllmFlow.prefill(stack, id).status()).isEqualTo(200);
    Answer answer = VllmFlow.decode(stack, id);

    assertThat(answer.status()).isEqualTo(200);
    byte[] corrected = replace(body.bytes(), utf8(WRONG), utf8(RIGHT));
    assertThat(Arrays.equals(answer.body(), body.bytes()) || Arrays.equals(answer.body(), corrected))
        .as("%s: %d bytes received of %d, unchanged or only the usage corrected", body, answer.body().length, body.bytes().length)
        .isTrue();

    VllmFlow next = new VllmFlow(2, Duration.ofMillis(1)).install(stack);
    assertThat(next.run(stack, id + "-next")).isEqualTo(VllmFlow.Outcome.CORRECTED);
  }

  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  private static byte[] concat(byte[]... parts) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (byte[] part : parts) {
      out.writeBytes(part);
    }
    return out.toByteArray();
  }

  /** {@code bytes} with the first occurrence of {@code from} replaced by {@code to}. */
  private static byte[] replace(byte[] bytes, byte[] from, byte[] to) {
    for (int i = 0; i + from.length <= bytes.length; i++) {
      if (Arrays.equals(bytes, i, i + from.length, from, 0, from.length)) {
        return concat(Arrays.copyOfRange(bytes, 0, i), to, Arrays.copyOfRange(bytes, i + from.length, bytes.length));
      }
    }
    return bytes;
  }
}
