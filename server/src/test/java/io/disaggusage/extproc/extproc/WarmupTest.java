package io.disaggusage.extproc.extproc;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.config.Config;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import org.junit.jupiter.api.Test;

/** The warm-up drives the real code paths, and doubles as a start-up self-check of the correction. */
class WarmupTest {
  @Test
  void runsEveryPathAndLeavesNoState() {
    ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
    try {
      Warmup.Result first = Warmup.run(Config.defaults(), timer, 1);
      Warmup.Result more = Warmup.run(Config.defaults(), timer, 20);
      System.out.printf(
          "warm-up: first round %.1f ms, next 20 rounds %.1f ms%n", first.nanos() / 1e6, more.nanos() / 1e6);
      assertThat(first.corrected()).isTrue();
      assertThat(more.corrected()).isTrue();
    } finally {
      timer.shutdownNow();
    }
  }
}
