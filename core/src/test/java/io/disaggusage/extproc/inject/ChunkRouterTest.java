package io.disaggusage.extproc.inject;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The routing both rewriters share: copies only when the reply really differs from the chunk. */
class ChunkRouterTest {
  static byte[] b(String s) {
    return s.getBytes(StandardCharsets.US_ASCII);
  }

  static String s(byte[] b) {
    return new String(b, StandardCharsets.US_ASCII);
  }

  @Test
  void bytesHeldAndReleasedUnchangedInTheirChunkDoNotCopyIt() {
    ChunkRouter r = new ChunkRouter();
    byte[] chunk = b("abcdef");
    r.begin(chunk);
    r.route(2);
    r.hold(2);
    r.route(4);
    assertThat(r.heldBytes()).isEqualTo(2);
    r.release();
    assertThat(r.end()).isSameAs(chunk);
  }

  @Test
  void heldBytesCarryOverToTheNextChunkAndCanBeEditedAcrossSegments() {
    ChunkRouter r = new ChunkRouter();
    r.begin(b("ab{x:"));
    r.route(2);
    r.hold(2);
    assertThat(s(r.end())).isEqualTo("ab");
    r.begin(b("false}"));
    r.route(6);
    assertThat(r.heldBytes()).isEqualTo(9);
    r.release(5, 10, b("true"));
    assertThat(s(r.end())).isEqualTo("{x:true}");
  }

  @Test
  void insertDropSkipAndTakeHeld() {
    ChunkRouter r = new ChunkRouter();
    r.begin(b("0123456789"));
    r.route(2);
    r.insert(b("+ins"), 1);
    r.route(3);
    r.skip(4);
    r.route(5);
    r.hold(5);
    r.route(7);
    r.drop();
    r.route(8);
    r.hold(8);
    assertThat(s(r.end())).isEqualTo("01ins247");
    assertThat(s(r.takeHeld())).isEqualTo("89");
    assertThat(r.holding()).isFalse();
  }
}
