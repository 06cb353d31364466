package io.disaggusage.bench.envoy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

class JvmActivityTest {
  /** The lines of {@code jcmd <pid> PerfCounter.print} the record reads, among others it skips. */
  private static String counters(long compiles, long compileTicks, long young, long youngTicks, long frequency) {
    return String.join("\n", List.of(
        "12345:",
        "java.ci.totalTime=" + compileTicks,
        "java.property.java.vm.name=\"OpenJDK 64-Bit Server VM\"",
        "sun.ci.totalCompiles=" + compiles,
        "sun.gc.collector.0.invocations=" + young,
        "sun.gc.collector.0.time=" + youngTicks,
        "sun.gc.collector.1.invocations=1",
        "sun.gc.collector.1.time=" + frequency / 100,
        "sun.os.hrt.frequency=" + frequency,
        ""));
  }

  @Test
  void readsTheCountersInNanosecondsWhateverTheTickRate() {
    JvmActivity a = JvmActivity.parse(counters(936, 521_487_839, 3, 6_000_000, 1_000_000_000));
    assertThat(a).isEqualTo(new JvmActivity(936, 521_487_839, 4, 16_000_000));

    JvmActivity slowTicks = JvmActivity.parse(counters(10, 2_000, 0, 0, 1_000_000));
    assertThat(slowTicks.compileNanos()).isEqualTo(2_000_000);
    assertThat(slowTicks.collectionNanos()).isEqualTo(10_000_000);
  }

  @Test
  void theDifferenceOfTwoReadingsIsWhatHappenedBetweenThem() {
    JvmActivity before = new JvmActivity(900, 500_000_000, 4, 16_000_000);
    JvmActivity after = new JvmActivity(950, 620_000_000, 6, 19_500_000);
    JvmActivity between = after.since(before);
    assertThat(between).isEqualTo(new JvmActivity(50, 120_000_000, 2, 3_500_000));
    assertThat(between.describe()).isEqualTo("50 compiles (120 ms of compiler threads), 2 collections (3.5 ms)");
  }

  @Test
  void aMissingCounterIsNamed() {
    assertThatThrownBy(() -> JvmActivity.parse("sun.os.hrt.frequency=1000000000\n"))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("sun.ci.totalCompiles");
  }

  /** This JVM read from outside, as the benchmark reads its children: the JIT has compiled something. */
  @Test
  void readsARunningJvm() throws Exception {
    JvmActivity self = JvmActivity.read(ProcessHandle.current().pid());
    assertThat(self.compiles()).isPositive();
    assertThat(self.compileNanos()).isPositive();
    assertThat(Path.of(System.getProperty("java.home"), "bin", "jcmd")).isExecutable();
  }
}
