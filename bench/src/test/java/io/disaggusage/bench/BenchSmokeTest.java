package io.disaggusage.bench;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.bench.e2e.EndToEnd;
import io.disaggusage.bench.jmh.FingerprintBench;
import io.disaggusage.bench.jmh.GrowthBench;
import io.disaggusage.bench.jmh.JsonBench;
import io.disaggusage.bench.jmh.SseBench;
import io.disaggusage.extproc.classify.RequestFacts;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Every benchmark runs (one tiny iteration, no timing asserted) and measures what it claims: the
 * bodies are corrected by the path under measurement, not passed through as oversize or malformed.
 */
class BenchSmokeTest {
  private static final String CORRECTED = "\"prompt_tokens_details\":{\"cached_tokens\":7}";
  private static final String REPORTED = "\"prompt_tokens_details\":{\"cached_tokens\":1013}";

  @ParameterizedTest
  @EnumSource(EndToEnd.Driver.class)
  void endToEndRunsAgainstBothServersWithoutProblems(EndToEnd.Driver driver) throws Exception {
    // A second each: on a loaded 2-core host with the coverage agent, the first pairs of a cold JVM took
    // longer than a 300 ms warm-up plus a 300 ms window, and the window saw no reply at all.
    List<EndToEnd.Level> levels =
        EndToEnd.run(driver, new int[] {4}, Duration.ofSeconds(1), Duration.ofSeconds(1), 1, s -> {});
    EndToEnd.Level level = levels.get(0);
    for (EndToEnd.Side side : List.of(level.service(), level.floor())) {
      assertThat(side.problems()).as(side.name()).isZero();
      assertThat(side.chunks()).as(side.name()).isPositive();
      assertThat(side.p99Nanos()).as(side.name()).isPositive();
    }
  }

  @Test
  void jmhMemoryAndGrowthPartsRunAndPrintTheirTables() throws Exception {
    String table = BenchMain.run(BenchMain.plan(new String[] {"--quick", "--skip-e2e"}));
    assertThat(table)
        .contains("## 2. JMH", "SSE pass-through", "JSON 2.0 KiB rewrite", "## 3. Memory", "## 4. Growth",
            "## Targets");
  }

  @Test
  void sseBenchmarksMeasureCorrection() {
    var factory = Fixtures.processors();
    String stream = utf8(Fixtures.generationOutput(
        factory, true, Bodies.chunks(Bodies.chatStream(SseBench.EVENTS, 1), 1024, 16 * 1024, 7)));
    assertThat(stream).contains(CORRECTED).doesNotContain(REPORTED).endsWith("data: [DONE]\n\n");
    String continuous = utf8(Fixtures.generationOutput(
        factory, true, Bodies.chunks(Bodies.continuousUsageStream(50, 2), 1024, 16 * 1024, 7)));
    assertThat(continuous.split(java.util.regex.Pattern.quote(CORRECTED), -1)).hasSize(51);
    assertThat(utf8(Bodies.contentOnly(SseBench.EVENTS, 1))).doesNotContain("usage");
  }

  @Test
  void jsonBenchmarksMeasureCorrectionAtEverySize() {
    var factory = Fixtures.processors();
    for (int size : new int[] {2048, 1024 * 1024}) {
      byte[] body = Bodies.chatCompletionWithLogprobs(size, 5);
      assertThat(body.length).isBetween(size * 9 / 10, size + 2048);
      String out = utf8(Fixtures.generationOutput(factory, false, Bodies.chunks(body, 16 * 1024)));
      assertThat(out).contains("\"top_logprobs\"").endsWith("\"usage\":{\"prompt_tokens\":1013,\"completion_tokens\":300,"
          + "\"total_tokens\":1313," + CORRECTED + "}}");
    }
  }

  @Test
  void fingerprintBenchmarksHashOneBodyOfEachShapeAndNotTheOther() {
    for (String shape : List.of("chat", "long")) {
      for (int size : new int[] {1024, 65536}) {
        FingerprintBench b = new FingerprintBench();
        b.shape = shape;
        b.size = size;
        b.setUp();
        RequestFacts with = (RequestFacts) b.scanWithFingerprint();
        RequestFacts without = (RequestFacts) b.scanWithoutFingerprint();
        assertThat(with.malformed()).isFalse();
        assertThat(with.fingerprint()).as("%s %d", shape, size).isNotNull();
        assertThat(without.malformed()).isFalse();
        assertThat(without.fingerprint()).as("%s %d", shape, size).isNull();
      }
    }
  }

  @Test
  void jacksonAndTokenizeBaselinesDoTheSameWork() throws Exception {
    JsonBench b = new JsonBench();
    b.size = 2048;
    b.setUp();
    assertThat(utf8(b.jacksonTree())).contains(CORRECTED);
    assertThat(b.tokenize()).isGreaterThan(100);
    GrowthBench.Sse sse = new GrowthBench.Sse();
    sse.chunks = 1000;
    sse.setUp();
  }

  private static String utf8(byte[] b) {
    return new String(b, StandardCharsets.UTF_8);
  }
}
