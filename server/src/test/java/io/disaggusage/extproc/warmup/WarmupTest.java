package io.disaggusage.extproc.warmup;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.config.ConfigLoader;
import io.disaggusage.extproc.config.ConfigLoader.Setting;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import org.junit.jupiter.api.Test;

/** The warm-up runs Envoy-shaped exchanges over a real gRPC connection and checks they come out corrected. */
class WarmupTest {
  @Test
  void runsEveryFlowOverLoopbackAndSelfChecks() {
    ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
    Config config = Config.defaults();
    try (Warmup warmup = Warmup.run(config, timer, WarmupStack.loopback(config.grpc().maxInboundMessageBytes()))) {
      Warmup.Result result = warmup.result();
      assertThat(result.problem()).isNull();
      assertThat(result.uncorrected()).isEmpty();
      assertThat(result.corrected()).isTrue();
      assertThat(result.rounds()).isGreaterThanOrEqualTo(Warmup.MIN_ROUNDS);
      assertThat(result.exchanges()).isEqualTo(result.rounds() * 2 * WarmupFlows.forConfig(config, 0).size());
    } finally {
      timer.shutdownNow();
    }
  }

  @Test
  void selfCheckNamesTheFlowsThatCameOutUncorrected() throws Exception {
    ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
    // usage objects longer than this are not parsed: no context usage is stored, nothing is corrected
    Config config =
        ConfigLoader.load(null, Map.of(), List.of(new Setting("limits.max_usage_bytes", "16", "test")));
    try (Warmup warmup = Warmup.run(config, timer, WarmupStack.loopback(config.grpc().maxInboundMessageBytes()))) {
      assertThat(warmup.result().problem()).isNull();
      assertThat(warmup.result().corrected()).isFalse();
      assertThat(warmup.result().uncorrected()).contains("vllm-chat-json", "trtllm-chat-msgpack", "responses");
    } finally {
      timer.shutdownNow();
    }
  }
}
