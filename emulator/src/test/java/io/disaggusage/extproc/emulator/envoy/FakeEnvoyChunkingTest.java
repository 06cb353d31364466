package io.disaggusage.extproc.emulator.envoy;

import io.disaggusage.extproc.driver.Chunking;
import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

/** The chunking strategies always reassemble to the original body. */
class FakeEnvoyChunkingTest {
  private static final byte[] BODY = "data: {\"x\":1}\n\ndata: [DONE]\n\n".getBytes(StandardCharsets.UTF_8);

  private static byte[] join(List<byte[]> chunks) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    chunks.forEach(out::writeBytes);
    return out.toByteArray();
  }

  @ParameterizedTest
  @ValueSource(longs = {1, 2, 3, 99})
  void randomSplitsReassembleAndAreReproducible(long seed) {
    List<byte[]> a = Chunking.random(seed, 6).split(BODY);
    List<byte[]> b = Chunking.random(seed, 6).split(BODY);
    assertThat(join(a)).isEqualTo(BODY);
    assertThat(a).hasSameSizeAs(b);
    assertThat(a).allSatisfy(c -> assertThat(c.length).isBetween(1, 6));
  }

  @Test
  void fixedBytewiseAndExplicitSplits() {
    assertThat(Chunking.fixed(10).split(BODY)).hasSize((BODY.length + 9) / 10);
    assertThat(Chunking.bytewise().split(BODY)).hasSize(BODY.length);
    List<byte[]> at = Chunking.at(3, 15).split(BODY);
    assertThat(at).hasSize(3);
    assertThat(new String(at.get(0), StandardCharsets.UTF_8)).isEqualTo("dat");
    assertThat(join(at)).isEqualTo(BODY);
  }

  @Test
  void wholeAndEmptyFinalChunk() {
    assertThat(Chunking.whole().split(new byte[0])).isEmpty();
    List<byte[]> withEmpty = Chunking.whole().withEmptyFinalChunk().split(BODY);
    assertThat(withEmpty).hasSize(2);
    assertThat(withEmpty.get(1)).isEmpty();
    assertThat(Chunking.whole().withEmptyFinalChunk().split(new byte[0])).hasSize(1);
  }
}
