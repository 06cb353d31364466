package io.disaggusage.bench.envoy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/** The real-engine row's options: on by default, off with {@code --quick} (the suite's smoke run never starts vLLM). */
class EnvoyBenchOptionsTest {
  @Test
  void theFullRunEndsWithTheRealEngineRow() {
    EnvoyBenchOptions o = EnvoyBenchOptions.parse();
    assertThat(o.realEngine()).isTrue();
    assertThat(o.onlyRealEngine()).isFalse();
    assertThat(o.realEngineRequests()).isEqualTo(600);
    assertThat(o.realEngineWarmup()).isEqualTo(1000);
    assertThat(o.concurrency()).containsExactly(16, 64, 256);
  }

  @Test
  void quickLeavesTheRealEngineOutUnlessAskedFor() {
    assertThat(EnvoyBenchOptions.parse("--quick").realEngine()).isFalse();
    assertThat(EnvoyBenchOptions.parse("--quick", "--real-engine", "on").realEngine()).isTrue();
    assertThat(EnvoyBenchOptions.parse("--real-engine", "off").realEngine()).isFalse();
  }

  @Test
  void onlyTheRealEngineRow() {
    EnvoyBenchOptions o = EnvoyBenchOptions.parse("--only-real-engine", "--real-engine-warmup", "100", "--real-engine-requests", "50");
    assertThat(o.realEngine()).isTrue();
    assertThat(o.onlyRealEngine()).isTrue();
    assertThat(o.realEngineWarmup()).isEqualTo(100);
    assertThat(o.realEngineRequests()).isEqualTo(50);
    assertThatThrownBy(() -> EnvoyBenchOptions.parse("--only-real-engine", "--real-engine", "off"))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> EnvoyBenchOptions.parse("--real-engine", "maybe")).hasMessageContaining("on or off");
  }

  /** The service runs as the README starts it unless JVM options are given; the report then says so. */
  @Test
  void serviceJvmOptionsAreNoneByDefaultAndNamedInTheReport() {
    EnvoyBenchOptions shipped = EnvoyBenchOptions.parse();
    assertThat(shipped.serviceJvmOptions()).isEmpty();
    assertThat(EnvoyBenchReport.serviceJvmOptions(shipped)).isEmpty();

    EnvoyBenchOptions tried =
        EnvoyBenchOptions.parse("--service-jvm-options", " -XX:CompileThresholdScaling=0.1  -XX:+UseSerialGC ");
    assertThat(tried.serviceJvmOptions()).containsExactly("-XX:CompileThresholdScaling=0.1", "-XX:+UseSerialGC");
    assertThat(EnvoyBenchReport.serviceJvmOptions(tried))
        .contains("-XX:CompileThresholdScaling=0.1 -XX:+UseSerialGC").contains("not as shipped");
    assertThatThrownBy(() -> EnvoyBenchOptions.parse("--service-jvm-options", "--grpc-port 1"))
        .hasMessageContaining("JVM options");
  }
}
