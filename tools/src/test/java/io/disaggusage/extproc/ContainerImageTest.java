package io.disaggusage.extproc;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.testkit.InstalledTools;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import javax.xml.parsers.DocumentBuilderFactory;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.w3c.dom.Document;

/**
 * The container image policies of {@code deploy/Dockerfile}, checked on its text (no Docker engine in
 * the build): a pinned JRE 17 base, a numeric non-root user, the default ports, a read-only-root-ready
 * JVM command line, and the jar that {@code tools/pom.xml} really produces.
 */
class ContainerImageTest {
  private static final Pattern LABEL = Pattern.compile("([A-Za-z0-9_.\\-]+)=(\"(?:[^\"\\\\]|\\\\.)*\"|\\S+)");

  record Instruction(String name, String args) {}

  static Path root;
  static List<Instruction> instructions;
  static String finalName;

  @BeforeAll
  static void parse() throws Exception {
    root = Path.of(System.getProperty("project.root"));
    instructions = instructions(Files.readString(root.resolve("deploy/Dockerfile")));
    DocumentBuilderFactory factory = DocumentBuilderFactory.newInstance();
    factory.setFeature("http://apache.org/xml/features/disallow-doctype-decl", true);
    Document pom = factory.newDocumentBuilder().parse(root.resolve("tools/pom.xml").toFile());
    finalName = pom.getElementsByTagName("finalName").item(0).getTextContent().trim();
    assertThat(finalName).isNotBlank();
  }

  /** Instructions in order: continuation lines joined, comments and blank lines dropped. */
  static List<Instruction> instructions(String dockerfile) {
    List<Instruction> out = new ArrayList<>();
    StringBuilder current = new StringBuilder();
    for (String line : dockerfile.lines().toList()) {
      String trimmed = line.strip();
      if (current.isEmpty() && (trimmed.isEmpty() || trimmed.startsWith("#"))) {
        continue;
      }
      if (trimmed.startsWith("#")) {
        continue; // a comment inside a continued instruction
      }
      if (trimmed.endsWith("\\")) {
        current.append(trimmed, 0, trimmed.length() - 1).append(' ');
        continue;
      }
      current.append(trimmed);
      String text = current.toString().strip();
      current.setLength(0);
      int space = text.indexOf(' ');
      out.add(new Instruction(text.substring(0, space).toUpperCase(Locale.ROOT), text.substring(space + 1).strip()));
    }
    assertThat(current).as("dangling line continuation").isEmpty();
    return out;
  }

  static List<Instruction> all(String name) {
    return instructions.stream().filter(i -> i.name().equals(name)).toList();
  }

  static Instruction last(String name) {
    List<Instruction> found = all(name);
    assertThat(found).as(name).isNotEmpty();
    return found.get(found.size() - 1);
  }

  static String jarInImage() {
    return "/app/" + finalName + ".jar";
  }

  @Test
  void baseIsAJre17ImageWithAPinnedTagNeverLatest() {
    List<Instruction> from = all("FROM");
    assertThat(from).as("single stage: the jar is built outside the image").hasSize(1);
    String image = from.get(0).args().split("\\s+")[0];
    String withoutDigest = image.contains("@") ? image.substring(0, image.indexOf('@')) : image;
    int colon = withoutDigest.lastIndexOf(':');
    assertThat(colon).as("explicit tag on %s", image).isGreaterThan(withoutDigest.lastIndexOf('/'));
    String tag = withoutDigest.substring(colon + 1);
    assertThat(tag).isNotEqualTo("latest").startsWith("17").contains("jre");
  }

  @Test
  void runsAsANumericNonRootUser() {
    String user = last("USER").args();
    assertThat(user).matches("\\d+(:\\d+)?");
    for (String id : user.split(":")) {
      assertThat(Integer.parseInt(id)).as("uid/gid in USER %s", user).isPositive();
    }
    assertThat(user).isEqualTo("65532:65532");
    // The user is set after everything that needs root (the COPY of the jar).
    assertThat(instructions.indexOf(last("USER"))).isGreaterThan(instructions.indexOf(last("COPY")));
  }

  @Test
  void exposesTheDefaultPorts() {
    Set<Integer> exposed =
        all("EXPOSE").stream()
            .flatMap(i -> Arrays.stream(i.args().split("\\s+")))
            .map(port -> Integer.parseInt(port.replace("/tcp", "")))
            .collect(Collectors.toSet());
    Config defaults = Config.defaults();
    assertThat(exposed).containsExactlyInAnyOrder(defaults.grpc().port(), defaults.admin().port());
  }

  @Test
  void entrypointRunsTheJarThePomBuildsWithContainerReadyJvmFlags() throws Exception {
    String[] entrypoint = new ObjectMapper().readValue(last("ENTRYPOINT").args(), String[].class);
    List<String> argv = List.of(entrypoint);
    assertThat(argv.get(0)).isEqualTo("java");
    int jar = argv.indexOf("-jar");
    assertThat(jar).as("-jar in %s", argv).isPositive();
    assertThat(argv.get(jar + 1)).isEqualTo(jarInImage());
    assertThat(argv).hasSize(jar + 2); // server arguments come from CMD / docker run
    assertThat(argv.subList(1, jar))
        .contains(
            "-XX:MaxRAMPercentage=75",
            "-XX:+ExitOnOutOfMemoryError",
            "-XX:+PerfDisableSharedMem",
            "-Djava.io.tmpdir=/tmp")
        .allMatch(flag -> flag.startsWith("-"));
    // Nothing else the JVM writes may land outside /tmp on a read-only root filesystem.
    argv.stream().filter(a -> a.startsWith("-XX:ErrorFile=")).forEach(a -> assertThat(a).startsWith("-XX:ErrorFile=/tmp/"));

    List<String> copy = List.of(last("COPY").args().split("\\s+"));
    assertThat(copy).containsExactly("tools/target/" + finalName + ".jar", jarInImage());
  }

  /**
   * The README's run command starts the jar with the JVM options the tests and the benchmark use, and the
   * image with the same direct-memory cap (its heap follows the container's limit).
   */
  @Test
  void readmeRunsTheJarWithTheJvmOptionsTheTestsUse() throws Exception {
    String readme = Files.readString(root.resolve("README.md"));
    String options = String.join(" ", InstalledTools.SERVICE_JVM_OPTIONS);
    assertThat(readme)
        .contains("java " + options + " -XX:SharedArchiveFile=tools/target/disagg-usage-extproc.jsa -jar"
            + " tools/target/disagg-usage-extproc.jar");
    List<String> entrypoint = List.of(new ObjectMapper().readValue(last("ENTRYPOINT").args(), String[].class));
    assertThat(entrypoint).contains("-XX:MaxDirectMemorySize=128m");
  }

  @Test
  void carriesOciLabelsAndFetchesNothingAtBuildTime() {
    Map<String, String> labels = new LinkedHashMap<>();
    for (Instruction label : all("LABEL")) {
      Matcher m = LABEL.matcher(label.args());
      while (m.find()) {
        labels.put(m.group(1), m.group(2));
      }
    }
    assertThat(labels)
        .containsKeys(
            "org.opencontainers.image.title",
            "org.opencontainers.image.description",
            "org.opencontainers.image.version",
            "org.opencontainers.image.base.name");
    assertThat(labels.get("org.opencontainers.image.title")).isEqualTo("\"" + finalName + "\"");
    assertThat(all("ADD")).as("the image build downloads nothing").isEmpty();
  }

  /**
   * The one thing the image build runs is the jar itself, offline, to record the class-data archive
   * the entrypoint loads: the same start (--exit-when-ready) tools/pom.xml runs beside the jar.
   */
  @Test
  void imageBuildOnlyRecordsTheClassDataArchiveTheEntrypointUses() throws Exception {
    assertThat(all("RUN")).as("RUN steps").hasSize(1);
    List<String> run = List.of(new ObjectMapper().readValue(last("RUN").args(), String[].class));
    String archive = jarInImage().replaceAll("\\.jar$", ".jsa");
    assertThat(run)
        .as("the RUN step, exec form")
        .containsExactly(
            "java", "-XX:ArchiveClassesAtExit=" + archive, "-Xlog:cds=error", "-jar", jarInImage(),
            "--exit-when-ready", "--grpc-port=0", "--admin-port=0", "--log-level=warn");
    String[] entrypoint = new ObjectMapper().readValue(last("ENTRYPOINT").args(), String[].class);
    assertThat(entrypoint).contains("-XX:SharedArchiveFile=" + archive);
    String pom = Files.readString(root.resolve("tools/pom.xml"));
    assertThat(pom)
        .as("the build records the archive the same way")
        .contains("<argument>--exit-when-ready</argument>", "<argument>-XX:ArchiveClassesAtExit=");
  }

  @Test
  void buildContextAdmitsTheJarAndReadmeShowsBuildAndReadOnlyRun() throws Exception {
    List<String> ignore =
        Files.readString(root.resolve(".dockerignore")).lines()
            .map(String::strip)
            .filter(l -> !l.isEmpty() && !l.startsWith("#"))
            .toList();
    assertThat(ignore).containsExactly("*", "!tools/target/" + finalName + ".jar");

    String readme = Files.readString(root.resolve("README.md"));
    assertThat(readme)
        .contains("## Container image")
        .contains("docker build -f deploy/Dockerfile -t ")
        .contains("--read-only --tmpfs /tmp");
  }
}
