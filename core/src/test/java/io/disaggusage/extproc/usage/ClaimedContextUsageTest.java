package io.disaggusage.extproc.usage;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.usage.JsonUsageRewriter.Rewritten;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * A context usage carried in the generation request ({@code ctx_usage}) is a claim a client could have
 * written: whatever it says, the client is billed no less than the generation worker's own usage would
 * bill it (prompt no smaller, cached no larger), and an honest claim comes out as the context worker's
 * truth.
 */
class ClaimedContextUsageTest {

  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      value = {
        // what | claim prompt, cached | G prompt, cached | out prompt, cached
        "honest claim, buggy generation worker (P/D count)   | 10, 4  | 10, 10 | 10, 4",
        "honest claim, generation worker already right       | 10, 4  | 10, 4  | 10, 4",
        "forged small prompt on a leg that prefilled locally | 1, 1   | 75, 0  | 75, 0",
        "forged whole-prompt cache hit, local prefill         | 75, 74 | 75, 16 | 75, 16",
        "forged larger prompt: the client pays more          | 900, 0 | 75, 16 | 900, 0",
      })
  void aClaimBillsNoLessThanTheGenerationWorker(
      String what, String claim, String generation, String out) {
    long[] c = pair(claim);
    long[] g = pair(generation);
    long[] expected = pair(out);
    ContextUsage claimed = JsonUsageRewriterTest.ctx(usage(c[0], c[1], 1)).asClaim();
    String doc = "{\"id\":\"x\",\"usage\":" + usage(g[0], g[1], 7) + "}";
    JsonUsageRewriter.Result r =
        new JsonUsageRewriter(UsageDocument.newFactory(1 << 20), 64 * 1024)
            .rewrite(doc.getBytes(StandardCharsets.UTF_8), claimed, ApiShapes.CHAT);
    assertThat(r).isInstanceOf(Rewritten.class);
    UsageFigures figures = ((Rewritten) r).figures();
    assertThat(figures.prompt().longValueExact()).as("prompt").isEqualTo(expected[0]);
    assertThat(figures.cached().longValueExact()).as("cached").isEqualTo(expected[1]);
    assertThat(figures.total().longValueExact()).as("total").isEqualTo(expected[0] + 7);
    assertThat(new String(((Rewritten) r).document(), StandardCharsets.UTF_8))
        .isEqualTo("{\"id\":\"x\",\"usage\":" + usage(expected[0], expected[1], 7) + "}");
  }

  private static long[] pair(String text) {
    String[] parts = text.split(",");
    return new long[] {Long.parseLong(parts[0].trim()), Long.parseLong(parts[1].trim())};
  }

  private static String usage(long prompt, long cached, long completion) {
    return "{\"prompt_tokens\":" + prompt + ",\"completion_tokens\":" + completion + ",\"total_tokens\":"
        + (prompt + completion) + ",\"prompt_tokens_details\":{\"cached_tokens\":" + cached + "}}";
  }
}
