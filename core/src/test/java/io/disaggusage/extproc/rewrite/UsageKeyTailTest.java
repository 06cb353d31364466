package io.disaggusage.extproc.rewrite;

import static io.disaggusage.extproc.testing.Text.utf8;
import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class UsageKeyTailTest {
  @Test
  void findsAKeyInTheChunkAfterTheTail() {
    UsageKeyTail tail = new UsageKeyTail();
    tail.remember(utf8("{\"a\":1,"), 0, 7);
    assertThat(tail.length()).isEqualTo(6);
    byte[] chunk = utf8("\"usage\":{}}");
    assertThat(tail.indexOf(chunk, 0, chunk.length)).isEqualTo(6);
  }

  @Test
  void findsAKeyStraddlingTheTailAndTheChunk() {
    UsageKeyTail tail = new UsageKeyTail();
    byte[] first = utf8("{\"us");
    tail.remember(first, 0, first.length);
    byte[] chunk = utf8("age\":{}}");
    assertThat(tail.indexOf(chunk, 0, chunk.length)).isEqualTo(1);
    assertThat(tail.straddling(chunk, 0, chunk.length, tail.length())).isEqualTo(1);
    assertThat(tail.straddling(chunk, 0, chunk.length, 0)).isEqualTo(-1);
  }

  @Test
  void keepsTheLastSixBytesAcrossShortPieces() {
    UsageKeyTail tail = new UsageKeyTail();
    for (String piece : new String[] {"xx", "\"u", "sa", "g"}) {
      tail.remember(utf8(piece), 0, piece.length());
    }
    assertThat(tail.length()).isEqualTo(6);
    byte[] chunk = utf8("e\"");
    assertThat(tail.indexOf(chunk, 0, chunk.length)).isEqualTo(1);
    tail.reset();
    assertThat(tail.length()).isZero();
    assertThat(tail.indexOf(chunk, 0, chunk.length)).isEqualTo(-1);
  }
}
