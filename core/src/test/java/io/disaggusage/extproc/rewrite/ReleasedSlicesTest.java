package io.disaggusage.extproc.rewrite;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class ReleasedSlicesTest {
  @Test
  void aWholeArrayLeavesUncopiedAndPiecesAreJoinedInOrder() {
    ReleasedSlices slices = new ReleasedSlices();
    assertThat(slices.take()).isEmpty();
    byte[] chunk = "data: x\n\n".getBytes(StandardCharsets.UTF_8);
    slices.add(chunk, 0, chunk.length);
    assertThat(slices.take()).isSameAs(chunk);
    slices.add(chunk, 0, 6);
    slices.add(chunk, 3, 0);
    slices.add(chunk, 6, 3);
    byte[] joined = slices.take();
    assertThat(joined).isNotSameAs(chunk).isEqualTo(chunk);
    assertThat(slices.take()).isEmpty();
  }
}
