package io.disaggusage.extproc;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The core's packages depend one way: the classifier and the rewriters both name an exchange's phase
 * and outcome from {@code exchange}, and neither reaches into the other. Read from the sources, so an
 * import or a fully qualified name both count.
 */
class PackageDependenciesTest {
  private static final Path SOURCES =
      Path.of(System.getProperty("project.root", ".."), "core/src/main/java/io/disaggusage/extproc");

  @Test
  void classifyAndRewriteUseNothingOfEachOther() throws IOException {
    assertThat(references("classify", "rewrite")).isEmpty();
    assertThat(references("rewrite", "classify")).isEmpty();
  }

  @Test
  void exchangeSitsBelowClassifyAndRewrite() throws IOException {
    assertThat(references("exchange", "classify")).isEmpty();
    assertThat(references("exchange", "rewrite")).isEmpty();
  }

  /** Every line of {@code from}'s sources that names a class of package {@code to}, with its file. */
  private static List<String> references(String from, String to) throws IOException {
    Path dir = SOURCES.resolve(from);
    assertThat(dir).isDirectory();
    String named = "io.disaggusage.extproc." + to + ".";
    List<String> found = new ArrayList<>();
    try (Stream<Path> files = Files.list(dir)) {
      for (Path file : files.filter(f -> f.toString().endsWith(".java")).toList()) {
        for (String line : Files.readAllLines(file)) {
          if (line.contains(named)) {
            found.add(file.getFileName() + ": " + line.trim());
          }
        }
      }
    }
    return found;
  }
}
