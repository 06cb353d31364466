package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The shipped jar carries the emulator (for {@code demo}, {@code replay}, {@code sandbox} and {@code
 * workers}), but serving never loads it: the service started as a user starts it, through a real
 * Envoy, corrects a flow while the JVM logs every class it loads, and no class of the emulator, of
 * what the other commands run (demo, replay, sandbox) or of the test kit is among them. (The four
 * command classes themselves are named in {@code Main}'s table; picocli only introspects them, and so
 * loads what they use, when the arguments name one.)
 *
 * <p>The service is started as the README starts it, with the class-data archive the build recorded
 * beside the jar: the serving path's classes must come from that archive, or the archive does not fit
 * the jar and the start-up it saves is lost without anyone noticing.
 */
class ShippedJarClassesTest {
  private static final Pattern LOADED = Pattern.compile("\\] (io\\.disaggusage\\.extproc\\.[\\w.$]+) source:");
  /** How {@code -Xlog:class+load} names a class taken from the dynamic (top) class-data archive. */
  private static final String FROM_ARCHIVE = "source: shared objects file (top)";

  /** Packages only the other commands use; the serving path must not touch them. */
  private static final List<String> NOT_SERVING =
      List.of("io.disaggusage.extproc.emulator.", "io.disaggusage.extproc.tools.", "io.disaggusage.extproc.testkit.");

  @Test
  void servingLoadsNoEmulatorClass() throws Exception {
    Path classLog = Tools.logs().resolve("shipped-jar-classes.log");
    Files.deleteIfExists(classLog);
    String release = Tools.releases().findFirst().orElseThrow();
    try (Stack stack =
        Stack.start("shipped-jar-classes", release, 1, "JAVA_TOOL_OPTIONS=-Xlog:class+load=info:file=" + classLog)) {
      VllmFlow flow = new VllmFlow(3, Duration.ofMillis(1)).install(stack);
      assertThat(VllmFlow.prefill(stack, "classes-1").status()).isEqualTo(200);
      assertThat(flow.judge(VllmFlow.decode(stack, "classes-1"))).isEqualTo(VllmFlow.Outcome.CORRECTED);
    }
    List<String> loaded =
        Files.readAllLines(classLog).stream().map(LOADED::matcher).filter(Matcher::find).map(m -> m.group(1)).toList();
    assertThat(loaded).as("the service's classes were logged").anyMatch(c -> c.startsWith("io.disaggusage.extproc.stream."));
    assertThat(loaded).anyMatch(c -> c.startsWith("io.disaggusage.extproc.rewrite."));
    assertThat(loaded).as("classes the serving path loaded")
        .noneMatch(c -> NOT_SERVING.stream().anyMatch(c::startsWith));
    assertThat(Files.readAllLines(classLog))
        .as("the stream's classes came from the class-data archive built beside the jar")
        .anyMatch(line -> line.contains(" io.disaggusage.extproc.stream.ExchangeStream " + FROM_ARCHIVE))
        .anyMatch(line -> line.contains(" io.disaggusage.extproc.rewrite.GenerationSseRewriter " + FROM_ARCHIVE));
  }
}
