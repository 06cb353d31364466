package io.disaggusage.extproc;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.testkit.InstalledTools;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * The README's run command starts the jar with the JVM options the tests and the benchmark use
 * ({@link InstalledTools#SERVICE_JVM_OPTIONS}) and the class-data archive the build records beside it.
 * The container image's entrypoint is tested on the image itself (e2e ContainerImageTest).
 */
class ReadmeRunCommandTest {
  @Test
  void readmeRunsTheJarWithTheJvmOptionsTheTestsUse() throws Exception {
    String readme = Files.readString(Path.of(System.getProperty("project.root")).resolve("README.md"));
    String options = String.join(" ", InstalledTools.SERVICE_JVM_OPTIONS);
    assertThat(readme)
        .contains("java " + options + " -XX:SharedArchiveFile=tools/target/disagg-usage-extproc.jsa -jar"
            + " tools/target/disagg-usage-extproc.jar");
  }
}
