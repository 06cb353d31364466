package io.disaggusage.extproc.rewrite;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class UsageKeyTailTest {
  private static byte[] b(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void findsAKeyInTheChunkAfterTheTail() {
    UsageKeyTail tail = new UsageKeyTail();
    tail.remember(b("{\"a\":1,"), 0, 7);
    assertThat(tail.length()).isEqualTo(6);
    byte[] chunk = b("\"usage\":{}}");
    assertThat(tail.indexOf(chunk, 0, chunk.length)).isEqualTo(6);
  }

  @Test
  void findsAKeyStraddlingTheTailAndTheChunk() {
    UsageKeyTail tail = new UsageKeyTail();
    byte[] first = b("{\"us");
    tail.remember(first, 0, first.length);
    byte[] chunk = b("age\":{}}");
    assertThat(tail.indexOf(chunk, 0, chunk.length)).isEqualTo(1);
    assertThat(tail.straddling(chunk, 0, chunk.length, tail.length())).isEqualTo(1);
    assertThat(tail.straddling(chunk, 0, chunk.length, 0)).isEqualTo(-1);
  }

  @Test
  void keepsTheLastSixBytesAcrossShortPieces() {
    UsageKeyTail tail = new UsageKeyTail();
    for (String piece : new String[] {"xx", "\"u", "sa", "g"}) {
      tail.remember(b(piece), 0, piece.length());
    }
    assertThat(tail.length()).isEqualTo(6);
    byte[] chunk = b("e\"");
    assertThat(tail.indexOf(chunk, 0, chunk.length)).isEqualTo(1);
    tail.reset();
    assertThat(tail.length()).isZero();
    assertThat(tail.indexOf(chunk, 0, chunk.length)).isEqualTo(-1);
  }
}
