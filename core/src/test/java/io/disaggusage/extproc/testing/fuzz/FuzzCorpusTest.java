package io.disaggusage.extproc.testing.fuzz;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The committed fuzz corpora are exactly what {@link FuzzCorpus} generates (regenerate with its main). */
class FuzzCorpusTest {
  @Test
  void committedSeedsMatchTheGenerator() throws Exception {
    Path root = Path.of(System.getProperty("project.root", ".."));
    Map<String, byte[]> seeds = FuzzCorpus.seeds();
    assertThat(seeds).hasSizeGreaterThan(100);
    for (Map.Entry<String, byte[]> e : seeds.entrySet()) {
      Path file = FuzzCorpus.resources(root, e.getKey());
      assertThat(file).as(e.getKey()).exists();
      assertThat(Files.readAllBytes(file)).as(e.getKey()).isEqualTo(e.getValue());
    }
  }
}
