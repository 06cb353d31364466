package io.disaggusage.extproc.emulator.engines;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** Block-granular prefix caching with the engines' rules: full blocks, chained hashes, last token computed. */
class PrefixCacheTest {

  /** Tokens {@code from, from+1, ...}: distinct prompts share exactly the tokens they share. */
  private static int[] tokens(int from, int n) {
    return IntStream.range(from, from + n).toArray();
  }

  @Test
  void aFirstPromptMissesAndTheSamePromptAgainHitsItsFullBlocks() {
    PrefixCache cache = new PrefixCache(16, 100);
    assertThat(cache.prefill(tokens(0, 100))).isZero();
    assertThat(cache.prefill(tokens(0, 100))).isEqualTo(96);
    assertThat(cache.size()).isEqualTo(6);
  }

  @ParameterizedTest(name = "{0} tokens -> {1} cached")
  @CsvSource({"1, 0", "15, 0", "16, 0", "17, 16", "31, 16", "32, 16", "33, 32", "48, 32", "49, 48"})
  void theLastPromptTokenIsAlwaysComputedSoAFullLastBlockIsNotReused(int n, int cached) {
    PrefixCache cache = new PrefixCache(16, 100);
    cache.prefill(tokens(0, n));
    assertThat(cache.prefill(tokens(0, n))).isEqualTo(cached);
  }

  @Test
  void aSharedPrefixHitsUpToTheLastFullBlockItCovers() {
    PrefixCache cache = new PrefixCache(16, 100);
    cache.prefill(tokens(0, 64));
    int[] divergesAt40 = tokens(0, 64);
    for (int i = 40; i < 64; i++) {
      divergesAt40[i] = 1000 + i;
    }
    assertThat(cache.prefill(divergesAt40)).isEqualTo(32);
  }

  @Test
  void aDifferentFirstTokenMakesEveryLaterBlockMissEvenWithTheSameTokens() {
    PrefixCache cache = new PrefixCache(16, 100);
    cache.prefill(tokens(0, 64));
    int[] bustedFirst = tokens(0, 64);
    bustedFirst[0] = 999;
    assertThat(cache.prefill(bustedFirst)).isZero();
  }

  @Test
  void aLongerPromptReusesTheShorterOnesBlocks() {
    PrefixCache cache = new PrefixCache(16, 100);
    cache.prefill(tokens(0, 40));
    assertThat(cache.prefill(tokens(0, 80))).isEqualTo(32);
    assertThat(cache.prefill(tokens(0, 80))).isEqualTo(64);
  }

  @Test
  void leastRecentlyUsedBlocksAreEvicted() {
    PrefixCache cache = new PrefixCache(4, 4);
    cache.prefill(tokens(0, 9)); // blocks a1 a2
    cache.prefill(tokens(100, 9)); // blocks b1 b2
    assertThat(cache.prefill(tokens(0, 9))).isEqualTo(8); // a1 a2 used again
    cache.prefill(tokens(200, 9)); // c1 c2 evict b1 b2, the least recently used
    assertThat(cache.size()).isEqualTo(4);
    assertThat(cache.prefill(tokens(0, 9))).isEqualTo(8);
    assertThat(cache.prefill(tokens(100, 9))).isZero();
  }

  @Test
  void otherBlockSizes() {
    PrefixCache cache = new PrefixCache(64, 10);
    cache.prefill(tokens(0, 200));
    assertThat(cache.prefill(tokens(0, 200))).isEqualTo(192);
    assertThatThrownBy(() -> new PrefixCache(0, 10)).isInstanceOf(IllegalArgumentException.class);
  }
}
