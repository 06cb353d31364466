package io.disaggusage.extproc.inject;

import static io.disaggusage.extproc.testing.Text.text;
import static io.disaggusage.extproc.testing.Text.utf8;
import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The routing both rewriters share: copies only when the reply really differs from the chunk. */
class ChunkRouterTest {
  @Test
  void bytesHeldAndReleasedUnchangedInTheirChunkDoNotCopyIt() {
    ChunkRouter r = new ChunkRouter();
    byte[] chunk = utf8("abcdef");
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
    r.begin(utf8("ab{x:"));
    r.route(2);
    r.hold(2);
    assertThat(text(r.end())).isEqualTo("ab");
    r.begin(utf8("false}"));
    r.route(6);
    assertThat(r.heldBytes()).isEqualTo(9);
    r.release(5, 10, utf8("true"));
    assertThat(text(r.end())).isEqualTo("{x:true}");
  }

  @Test
  void insertDropSkipAndTakeHeld() {
    ChunkRouter r = new ChunkRouter();
    r.begin(utf8("0123456789"));
    r.route(2);
    r.insert(utf8("+ins"), 1);
    r.route(3);
    r.skip(4);
    r.route(5);
    r.hold(5);
    r.route(7);
    r.drop();
    r.route(8);
    r.hold(8);
    assertThat(text(r.end())).isEqualTo("01ins247");
    assertThat(text(r.takeHeld())).isEqualTo("89");
    assertThat(r.holding()).isFalse();
  }
}
