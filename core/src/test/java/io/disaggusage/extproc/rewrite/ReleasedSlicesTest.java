package io.disaggusage.extproc.rewrite;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class ReleasedSlicesTest {
  private static final byte[] CHUNK = "data: x\n\ndata: y\n\n".getBytes(StandardCharsets.UTF_8);

  @Test
  void aWholeArrayLeavesUncopied() {
    ReleasedSlices slices = new ReleasedSlices();
    assertThat(slices.take()).isEmpty();
    slices.add(CHUNK, 0, CHUNK.length);
    assertThat(slices.take()).isSameAs(CHUNK);
    assertThat(slices.take()).isEmpty();
  }

  @Test
  void aChunkReleasedEventByEventIsOneRunAndLeavesUncopied() {
    ReleasedSlices slices = new ReleasedSlices();
    slices.add(CHUNK, 0, 9);
    slices.add(CHUNK, 3, 0);
    slices.add(CHUNK, 9, 9);
    assertThat(slices.take()).isSameAs(CHUNK);
  }

  @Test
  void piecesThatAreNotOneRunAreJoinedInOrder() {
    ReleasedSlices slices = new ReleasedSlices();
    byte[] patched = "data: z\n\n".getBytes(StandardCharsets.UTF_8);
    slices.add(CHUNK, 0, 9);
    slices.add(patched, 0, patched.length); // another array between two pieces of the chunk
    slices.add(CHUNK, 9, 9);
    assertThat(new String(slices.take(), StandardCharsets.UTF_8)).isEqualTo("data: x\n\ndata: z\n\ndata: y\n\n");
    slices.add(CHUNK, 9, 9); // the same array, but not where the last piece ended
    slices.add(CHUNK, 0, 9);
    assertThat(new String(slices.take(), StandardCharsets.UTF_8)).isEqualTo("data: y\n\ndata: x\n\n");
    slices.add(CHUNK, 0, 6); // a run that is not the whole array: copied
    slices.add(CHUNK, 6, 3);
    byte[] part = slices.take();
    assertThat(part).isNotSameAs(CHUNK);
    assertThat(new String(part, StandardCharsets.UTF_8)).isEqualTo("data: x\n\n");
  }
}
