package io.disaggusage.extproc.metrics;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.config.Config;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

class ModelLabelsTest {
  @Test
  void allowListNamesItsModelsAndGroupsTheRest() {
    ModelLabels labels = new ModelLabels(new Config.Metrics(List.of("llama", "qwen"), 20, Config.defaults().metrics().otlp()));
    assertThat(labels.label("llama")).isEqualTo("llama");
    assertThat(labels.label("qwen")).isEqualTo("qwen");
    assertThat(labels.label("mistral")).isEqualTo(ModelLabels.OTHER);
    assertThat(labels.label(null)).isEqualTo(ModelLabels.UNKNOWN);
    assertThat(labels.label("")).isEqualTo(ModelLabels.UNKNOWN);
  }

  @Test
  void withoutAllowListTheFirstNModelsSeenGetLabels() {
    ModelLabels labels = new ModelLabels(new Config.Metrics(List.of(), 3, Config.defaults().metrics().otlp()));
    Set<String> seen = new HashSet<>();
    IntStream.range(0, 100).forEach(i -> seen.add(labels.label("model-" + i)));
    assertThat(seen).containsExactlyInAnyOrder("model-0", "model-1", "model-2", ModelLabels.OTHER);
    assertThat(labels.label("model-1")).isEqualTo("model-1");
    assertThat(labels.label("x".repeat(500))).isEqualTo(ModelLabels.OTHER);
  }

  @Test
  void concurrentFirstSightingsNeverExceedTheCap() throws Exception {
    ModelLabels labels = new ModelLabels(new Config.Metrics(List.of(), 5, Config.defaults().metrics().otlp()));
    Set<String> out = java.util.concurrent.ConcurrentHashMap.newKeySet();
    Thread[] threads = new Thread[8];
    for (int t = 0; t < threads.length; t++) {
      int base = t * 100;
      threads[t] = new Thread(() -> IntStream.range(0, 100).forEach(i -> out.add(labels.label("m" + (base + i)))));
      threads[t].start();
    }
    for (Thread t : threads) {
      t.join();
    }
    out.remove(ModelLabels.OTHER);
    assertThat(out).hasSize(5);
  }
}
