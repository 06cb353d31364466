package io.disaggusage.extproc.classify;

import static io.disaggusage.extproc.classify.CanonicalReference.body;
import static io.disaggusage.extproc.classify.PromptFingerprintTest.json;
import static io.disaggusage.extproc.classify.PromptFingerprintTest.msgpack;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.testkit.MsgpackBodies;
import io.disaggusage.extproc.testkit.MsgpackBodies.Style;
import java.nio.charset.StandardCharsets;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * Property (seeded random generation, seed printed, {@code -Dfingerprint.seed=N} replays): a random
 * JSON value — now and then an object
 * at or past the sorted form's member count, names and strings around the inline length, duplicate
 * names, big integers, doubles, nesting past the sorted form's depth — has the reference fingerprint ({@link CanonicalReference}) as
 * written, with its members shuffled and re-spelled (whitespace, escapes, number spellings), and in
 * MessagePack, cut at every split (2000 of them in a larger body); a value with one leaf changed never does.
 */
class PromptFingerprintFormPropertyTest {

  @Test
  void everySpellingOfARandomValueHasTheReferenceFingerprint() {
    long seed = Long.getLong("fingerprint.seed", System.nanoTime());
    System.out.println("PromptFingerprintFormPropertyTest seed " + seed);
    Random random = new Random(seed);
    Set<Character> forms = new TreeSet<>();
    // At least 100 values, and on until every object form has come up (one in a few dozen values is
    // past the sorted form's bounds: a seed once drew none in 100).
    for (int run = 0; run < 100 || forms.size() < 3 && run < 2000; run++) {
      Object value = CanonicalReference.value(random, 4);
      if (random.nextInt(6) == 0) {
        value = CanonicalReference.nest(value, CanonicalHasher.SORT_MAX_DEPTH - 2 + random.nextInt(5), random);
      }
      forms.addAll(CanonicalReference.forms(value));
      PromptFingerprint expected = CanonicalReference.fingerprint("m", value);
      String plain = body("m", value, null);
      String respelled = body("m", value, new Random(random.nextLong()));
      String as = "seed " + seed + " run " + run + " ";
      everySplit(plain.getBytes(StandardCharsets.UTF_8), false, expected, as + plain);
      everySplit(respelled.getBytes(StandardCharsets.UTF_8), false, expected, as + respelled);
      byte[] packed;
      try {
        packed = MsgpackBodies.fromJson(respelled, Style.values()[run % 3]);
      } catch (MsgpackBodies.NotRepresentable e) {
        packed = null; // an integer beyond MessagePack's range: JSON only
      }
      if (packed != null) {
        everySplit(packed, true, expected, as + "msgpack " + respelled);
        assertThat(RequestBodyScannerFuzzTest.read(
                new MsgpackRequestScanner(RequestBodyScannerFuzzTest.JSON, 64 * 1024), packed, new Random(run))
            .fingerprint()).as(as + "msgpack in random chunks").isEqualTo(expected);
      }
      assertThat(RequestBodyScannerFuzzTest.scan(respelled.getBytes(StandardCharsets.UTF_8), 64 * 1024, new Random(run))
          .fingerprint()).as(as + "json in random chunks").isEqualTo(expected);
      Object other = CanonicalReference.mutate(value, random);
      assertThat(json(body("m", other, new Random(run)))).as(as + "mutated %s", other).isNotEqualTo(expected);
    }
    assertThat(forms).as("seed %d: every object form generated", seed).containsExactly('D', 'L', 'O');
  }

  /** Every split of a body up to 2000 bytes; 2000 evenly spread ones in a larger body. */
  private static void everySplit(byte[] body, boolean packed, PromptFingerprint expected, String as) {
    int step = 1 + body.length / 2000;
    for (int i = 0; i <= body.length; i += step) {
      assertThat(packed ? msgpack(body, i) : json(body, i)).as("%s split at %d", as, i).isEqualTo(expected);
    }
  }
}
