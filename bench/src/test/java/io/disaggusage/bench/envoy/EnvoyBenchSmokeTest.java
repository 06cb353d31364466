package io.disaggusage.bench.envoy;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The run through real Envoy works end to end: one tiny run ({@code --quick}) of every setup with and
 * without an inter-token delay, on the real Envoy 1.40.0 and the shipped jar as {@code java -jar} starts
 * it — the same code path as the full benchmark. No time is asserted; every generation response must
 * come out corrected by the service and untouched by the two others.
 *
 * <p>It lives here rather than in e2e, next to the code it checks; this module declares a build-order
 * dependency on the tools module (see its pom), so the shipped jar exists when it runs. A missing Envoy
 * fails it with the install command (scripts/install-test-tools), never a skip.
 */
class EnvoyBenchSmokeTest {
  @Test
  void everySetupRunsFlowsAndOnlyTheServiceCorrectsThem() throws Exception {
    List<String> progress = new ArrayList<>();
    EnvoyBench.Result result = EnvoyBench.run(EnvoyBenchOptions.parse("--quick"), progress::add);

    assertThat(result.problems()).as("problems; progress:%n%s", String.join("\n", progress)).isEmpty();
    assertThat(result.cells()).hasSize(2); // no delay and 20 ms, at one concurrency
    for (EnvoyBench.Cell cell : result.cells()) {
      for (Setup setup : Setup.values()) {
        RunStats s = cell.combined().get(setup);
        assertThat(s.checked()).as("%s, %s delay: flows checked", setup.title(), cell.delay()).isPositive();
        assertThat(s.asExpected()).as("%s, %s delay: %s", setup.title(), cell.delay(),
            setup == Setup.SERVICE ? "corrected" : "untouched").isEqualTo(s.checked());
        assertThat(s.ttftP99()).as("%s TTFT measured", setup.title()).isPositive();
        assertThat(s.ttftSamples()).as("%s, %s delay: TTFT samples (--min-samples of --quick)", setup.title(),
            cell.delay()).isGreaterThanOrEqualTo(10);
        assertThat(s.waits().generationLines()).as("%s, %s delay: a generation line in Envoy's access log per response",
            setup.title(), cell.delay()).isGreaterThanOrEqualTo(s.checked());
        if (setup.extProc()) {
          assertThat(s.waits().of("request_header_latency_us").count())
              .as("%s, %s delay: Envoy's ext_proc waits read from its access log", setup.title(), cell.delay()).isPositive();
        } else {
          assertThat(s.waits().of("request_header_latency_us").count()).as("no ext_proc, no waits").isZero();
        }
      }
    }
    assertThat(result.restarts()).as("each ext_proc restarted and measured again").containsOnlyKeys(Setup.NULL, Setup.SERVICE);
    result.restarts().forEach((setup, s) -> {
      assertThat(s.checked()).as("%s after its restart: flows checked", setup.title()).isPositive();
      assertThat(s.asExpected()).as("%s after its restart: %s", setup.title(),
          setup == Setup.SERVICE ? "corrected" : "untouched").isEqualTo(s.checked());
      assertThat(s.timeline()).as("%s after its restart: flows per second of the 1 s window", setup.title()).hasSize(1);
    });
    // the null processor has no warm-up: its cold first exchanges may time out in Envoy; the service's may not
    assertThat(result.firstRunProblems().keySet()).as("problems of the service's first run and restart")
        .noneMatch(problem -> problem.contains(Setup.SERVICE.title()));
    String table = EnvoyBenchReport.render(result);
    assertThat(table).contains("## After a restart of the ext_proc alone", "## Inter-token delay 0 ms", "## Inter-token delay 20 ms",
        "### Envoy's ext_proc waits, generation leg, 20 ms", "| TTFT n |", "## (c) against (b)",
        "## ext_proc resident memory per open stream", "(c) this service");
  }
}
