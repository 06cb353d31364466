package io.disaggusage.extproc.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.testkit.ScenarioVectors.Vector;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The vector table itself: names that tell cells apart, and every vector stating what its client reads. */
class ScenarioVectorsTest {
  @Test
  void everySpecificationVectorHasItsOwnNameAndItsExpectedUsage() {
    assertThat(ScenarioVectors.specification()).extracting(Vector::name).doesNotHaveDuplicates();
    assertThat(ScenarioVectors.specification()).allSatisfy(v -> assertThat(v.usage()).as(v.name()).isNotNull());
  }

  @Test
  void theFirstRecomputePairEndsAsVllmAscendSaysRecomputed() {
    Vector first =
        ScenarioVectors.variants().stream().filter(v -> v.name().equals("ascendRecomputeFirstPair")).findFirst().orElseThrow();
    String stream = new String(first.generation().responseBody(), StandardCharsets.UTF_8);
    assertThat(stream).containsOnlyOnce("\"stop_reason\":\"recomputed\"");
  }
}
