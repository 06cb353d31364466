package io.disaggusage.extproc.sse;

import static org.assertj.core.api.Assertions.assertThat;

import com.code_intelligence.jazzer.junit.FuzzTest;
import io.disaggusage.extproc.testkit.FuzzInput;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * Fuzzes {@link SseFramer}: for any bytes, any event cap and any chunking, nothing escapes but the
 * items; their raw bytes concatenate to the input; the framer never holds more than its cap; and the
 * items are those of framing the whole input at once (oversize pieces compared as runs, since their
 * cut depends on the chunking by design). Corpus: {@code SseFramerFuzzTestInputs/}.
 */
class SseFramerFuzzTest {
  static final int[] CAPS = {8, 9, 16, 64, 300, 4096, 1 << 20};

  @FuzzTest(maxDuration = "30s")
  void framingIsLosslessBoundedAndChunkInvariant(byte[] input) {
    FuzzInput in = new FuzzInput(input);
    int cap = CAPS[in.choose(CAPS.length)];
    long seed = in.nextInt();
    int maxChunk = 1 + in.choose(64);
    check(in.document(), cap, new Random(seed), maxChunk);
  }

  /** The property, for one stream. */
  static void check(byte[] stream, int cap, Random rnd, int maxChunk) {
    List<String> whole = normalise(SseFramer.frameAll(stream, cap));
    List<SseItem> items = new ArrayList<>();
    SseFramer framer = new SseFramer(cap, items::add);
    int i = 0;
    while (i < stream.length) {
      int n = rnd.nextInt(4) == 0 ? 0 : Math.min(stream.length - i, 1 + rnd.nextInt(maxChunk));
      framer.feed(stream, i, n);
      assertThat(framer.heldBytes()).isLessThanOrEqualTo(cap);
      i += n;
    }
    framer.finish();
    ByteArrayOutputStream all = new ByteArrayOutputStream();
    items.forEach(it -> all.writeBytes(it.rawArray()));
    assertThat(all.toByteArray()).as("lossless").isEqualTo(stream);
    assertThat(normalise(items)).as("chunk invariant").isEqualTo(whole);
  }

  /** Items as comparable text; consecutive oversize pieces joined into one run. */
  static List<String> normalise(List<SseItem> items) {
    List<String> out = new ArrayList<>();
    StringBuilder run = null;
    for (SseItem item : items) {
      if (item instanceof SsePassThrough p && p.isOversize()) {
        if (run == null || p.startsOversizeEvent()) {
          if (run != null) {
            out.add(run.toString());
          }
          run = new StringBuilder("oversize:");
        }
        run.append(SseTestSupport.latin1(p.rawArray()));
        continue;
      }
      if (run != null) {
        out.add(run.toString());
        run = null;
      }
      String kind =
          item instanceof SseEvent e
              ? "event(" + e.terminated() + "," + e.eventType() + "," + e.dataLineCount() + "," + SseTestSupport.latin1(e.payloadBytes()) + "):"
              : "pass:";
      out.add(kind + SseTestSupport.latin1(item.rawArray()));
    }
    if (run != null) {
      out.add(run.toString());
    }
    return out;
  }
}
