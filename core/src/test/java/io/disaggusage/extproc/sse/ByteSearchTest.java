package io.disaggusage.extproc.sse;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The word-at-a-time searches agree with the obvious byte loops on every offset and length. */
class ByteSearchTest {
  private static final byte[] USAGE = "\"usage\"".getBytes(StandardCharsets.US_ASCII);
  /** Bytes that sit next to the searched ones in value, plus high bytes (negative in Java). */
  private static final byte[] ALPHABET = {
    '\n', '\r', 0x0B, 0x0C, 0x09, 0x0E, 0, 1, (byte) 0x80, (byte) 0x8A, (byte) 0x8D, (byte) 0xFF,
    '"', 'u', 's', 'a', 'g', 'e', 'f', 'h', 'x', ' '
  };

  @Test
  void lineBreakMatchesByteLoopForEveryRange() {
    Random rnd = new Random(0x5EA_2C4L);
    for (int round = 0; round < 300; round++) {
      byte[] a = randomBytes(rnd, rnd.nextInt(40), rnd.nextInt(4) == 0 ? 3 : ALPHABET.length);
      for (int from = 0; from <= a.length; from++) {
        for (int to = from; to <= a.length; to++) {
          assertThat(ByteSearch.lineBreak(a, from, to))
              .as("round %d [%d, %d)", round, from, to)
              .isEqualTo(naiveLineBreak(a, from, to));
        }
      }
    }
  }

  @Test
  void lineBreakFindsEachPositionOfALongRun() {
    for (int length = 0; length < 70; length++) {
      for (int at = 0; at < length; at++) {
        for (byte terminator : new byte[] {'\n', '\r'}) {
          byte[] a = new byte[length];
          java.util.Arrays.fill(a, (byte) 'a');
          a[at] = terminator;
          assertThat(ByteSearch.lineBreak(a, 0, length)).isEqualTo(at);
          assertThat(ByteSearch.lineBreak(a, at + 1, length)).isEqualTo(length);
        }
      }
    }
  }

  @Test
  void indexOfMatchesNaiveSearchForEveryRangeAndAnchor() {
    Random rnd = new Random(0x1DE_0F5L);
    for (int round = 0; round < 400; round++) {
      byte[] a = randomText(rnd, rnd.nextInt(60));
      for (int anchor = 0; anchor < USAGE.length; anchor++) {
        for (int from = 0; from <= a.length; from++) {
          for (int to = from; to <= a.length; to += 1 + rnd.nextInt(3)) {
            assertThat(ByteSearch.indexOf(a, from, to, USAGE, anchor))
                .as("round %d anchor %d [%d, %d) in %s", round, anchor, from, to, new String(a, StandardCharsets.ISO_8859_1))
                .isEqualTo(naiveIndexOf(a, from, to, USAGE));
          }
        }
      }
    }
  }

  @Test
  void indexOfFindsTheFirstOfSeveralAndNothingInAnEmptyRange() {
    byte[] a = "xx\"usage\"\"usage\"gg\"usage\"".getBytes(StandardCharsets.US_ASCII);
    assertThat(ByteSearch.indexOf(a, 0, a.length, USAGE, 4)).isEqualTo(2);
    assertThat(ByteSearch.indexOf(a, 3, a.length, USAGE, 4)).isEqualTo(9);
    assertThat(ByteSearch.indexOf(a, 3, 15, USAGE, 4)).isEqualTo(-1); // the second one ends at 16
    assertThat(ByteSearch.indexOf(a, 5, 5, USAGE, 4)).isEqualTo(-1);
  }

  private static byte[] randomBytes(Random rnd, int n, int alphabetSize) {
    byte[] a = new byte[n];
    for (int i = 0; i < n; i++) {
      a[i] = ALPHABET[rnd.nextInt(alphabetSize)];
    }
    return a;
  }

  /** Random pieces of the needle, whole needles and noise, so matches, near misses and overlaps occur. */
  private static byte[] randomText(Random rnd, int pieces) {
    String[] tokens = {"\"usage\"", "\"usag", "e\"", "g", "\"", "usage", "x", "\u00ff", "\"usage\"\"usage\"", "gg"};
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < pieces; i++) {
      sb.append(tokens[rnd.nextInt(tokens.length)]);
    }
    return sb.toString().getBytes(StandardCharsets.ISO_8859_1);
  }

  private static int naiveLineBreak(byte[] a, int from, int to) {
    for (int i = from; i < to; i++) {
      if (a[i] == '\n' || a[i] == '\r') {
        return i;
      }
    }
    return to;
  }

  private static int naiveIndexOf(byte[] a, int from, int to, byte[] needle) {
    outer:
    for (int i = from; i + needle.length <= to; i++) {
      for (int k = 0; k < needle.length; k++) {
        if (a[i + k] != needle[k]) {
          continue outer;
        }
      }
      return i;
    }
    return -1;
  }
}
