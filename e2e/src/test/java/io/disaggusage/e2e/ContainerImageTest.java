package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.e2e.ContainerImage.Entry;
import io.disaggusage.e2e.VllmFlow.Outcome;
import io.disaggusage.extproc.testkit.ChildProcess;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The container image the build writes (image/pom.xml, image/build-rootfs) is the one every shipped
 * manifest names, is distroless and non-root as its description says, and its entrypoint — run in a
 * root filesystem unpacked from the image file, as a container runtime runs it — serves, corrects a
 * flow through a real Envoy, uses its class-data archive and writes nothing outside {@code /tmp}.
 */
class ContainerImageTest {
  private static final String REPOSITORY = "ghcr.io/disagg-usage/disagg-usage-extproc";
  private static final Pattern REFERENCE = Pattern.compile(Pattern.quote(REPOSITORY) + ":([A-Za-z0-9._-]+)");
  /** The Debian packages the runtime's libraries come from (image/build-rootfs). */
  private static final List<String> PACKAGES = List.of("libc6", "libgcc-s1", "gcc-12-base", "libstdc++6", "zlib1g");

  private static ContainerImage image;
  private static List<Entry> entries;
  /** One root filesystem unpacked from the image for the tests that read or run it. */
  private static Path rootfs;

  @BeforeAll
  static void readImage() throws IOException {
    image = ContainerImage.built();
    entries = image.entries();
    rootfs = Tools.root().resolve("e2e/target/image-rootfs");
    if (Files.exists(rootfs)) {
      try (Stream<Path> old = Files.walk(rootfs)) {
        old.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
    image.unpackInto(rootfs);
  }

  @Test
  void isTaggedAsEveryShippedManifestNamesIt() throws IOException {
    Set<String> named = new TreeSet<>();
    for (String folder : List.of("deploy", "istio")) {
      try (Stream<Path> files = Files.walk(Tools.root().resolve(folder))) {
        for (Path file : files.filter(f -> f.toString().matches(".*\\.(ya?ml|md)$")).toList()) {
          Matcher m = REFERENCE.matcher(Files.readString(file));
          while (m.find()) {
            named.add(m.group());
          }
        }
      }
    }
    assertThat(named).as("image references in deploy/ and istio/").isNotEmpty();
    assertThat(image.repoTags()).as("the image file's tags").containsExactlyElementsOf(named);
  }

  @Test
  void runsAsTheDistrolessNonRootUserWithNoShellAndNothingItCanWrite() {
    assertThat(image.config().get("User").asText()).isEqualTo("65532:65532");
    assertThat(image.config().get("WorkingDir").asText()).isEqualTo("/app");
    assertThat(image.config().get("ExposedPorts").fieldNames()).toIterable().containsExactlyInAnyOrder("9002/tcp", "9090/tcp");
    assertThat(image.entrypoint()).startsWith("/opt/java/bin/java").contains("-XX:+ExitOnOutOfMemoryError",
        "-XX:MaxDirectMemorySize=128m", "-XX:SharedArchiveFile=/app/disagg-usage-extproc.jsa");
    assertThat(image.config().get("Labels").get("org.opencontainers.image.licenses").asText()).isEqualTo("Apache-2.0");

    Set<String> names = entries.stream().filter(e -> !e.directory()).map(e -> e.path().replaceFirst(".*/", "")).collect(Collectors.toSet());
    assertThat(names).as("no shell and no package manager").doesNotContain("sh", "bash", "dash", "busybox", "apt", "dpkg");
    for (Entry e : entries) {
      assertThat(e.uid()).as("%s owner", e.path()).isZero();
      assertThat(e.gid()).as("%s group", e.path()).isZero();
      assertThat(e.mode() & 06000).as("%s set-id bits", e.path()).isZero();
      if (!e.path().equals("tmp") && !e.link()) {
        assertThat(e.mode() & 0022).as("%s writable by others (mode %o)", e.path(), e.mode()).isZero();
      }
    }
    assertThat(entries).filteredOn(e -> e.path().equals("tmp")).singleElement()
        .satisfies(tmp -> assertThat(tmp.mode() & 0777).isEqualTo(0777));
  }

  @Test
  void carriesTheLicensesAndTheVersionsOfWhatItBundles() throws IOException {
    Set<String> paths = entries.stream().map(Entry::path).collect(Collectors.toSet());
    assertThat(paths).contains("app/LICENSE", "app/NOTICE", "app/disagg-usage-extproc.jar", "app/disagg-usage-extproc.jsa",
        "opt/java/legal/java.base/LICENSE", "opt/java/release", "etc/passwd", "etc/group");
    for (String pkg : PACKAGES) {
      assertThat(paths).as("dpkg status entry and copyright of %s", pkg)
          .contains("var/lib/dpkg/status.d/" + pkg, "usr/share/doc/" + pkg + "/copyright");
    }
    assertThat(Files.readString(rootfs.resolve("app/LICENSE"))).isEqualTo(Files.readString(Tools.root().resolve("LICENSE")));
    assertThat(Files.readString(rootfs.resolve("app/NOTICE"))).isEqualTo(Files.readString(Tools.root().resolve("NOTICE")));
    assertThat(Files.readString(rootfs.resolve("var/lib/dpkg/status.d/libc6"))).contains("Package: libc6", "Version: ");
    assertThat(Files.readString(rootfs.resolve("etc/passwd"))).contains("nonroot:x:65532:65532:");
  }

  @Test
  void entrypointStartsFromItsClassDataArchiveAndKnowsItsVersion() throws Exception {
    Path out = Tools.logs().resolve("image-version.log");
    Files.deleteIfExists(out);
    List<String> command = new ArrayList<>(image.launcher(rootfs));
    command.add("--version");
    // JAVA_TOOL_OPTIONS: how an operator adds JVM options to an image whose entrypoint is fixed
    ChildProcess entrypoint = new ChildProcess("the image's entrypoint --version", out, java.time.Duration.ofSeconds(5));
    entrypoint.launch(command, Map.of("JAVA_TOOL_OPTIONS", "-Xlog:class+load=info:stdout"));
    int exitCode = entrypoint.awaitExit(java.time.Duration.ofSeconds(60));
    String printed = Files.readString(out);
    assertThat(exitCode).as(printed.lines().filter(l -> !l.contains("class,load")).collect(Collectors.joining("\n")))
        .isZero();
    String version = image.repoTags().get(0).substring(REPOSITORY.length() + 1);
    assertThat(printed).contains(version);
    assertThat(printed.lines().filter(l -> l.contains(" io.disaggusage.extproc.Main ")))
        .as("the main class, from the application class-data archive")
        .singleElement().asString().contains("source: shared objects file (top)");
  }

  @Test
  void entrypointCorrectsAFlowThroughARealEnvoyAndWritesOnlyTmp() throws IOException {
    Set<String> before = files(rootfs);
    String release = Tools.envoyReleases().get(0);
    try (Stack stack = Stack.start("image-" + release, release, 1, image.launcher(rootfs))) {
      VllmFlow flow = new VllmFlow(3, Duration.ofMillis(1)).install(stack);
      assertThat(VllmFlow.prefill(stack, "image-1").status()).isEqualTo(200);
      Outcome outcome = flow.judge(VllmFlow.decode(stack, "image-1"));
      assertThat(outcome).as("a flow through Envoy %s and the image's service; its log: %s", release, stack.service().log())
          .isEqualTo(Outcome.CORRECTED);
      assertThat(stack.service().exchanges("generation", "rewritten")).isEqualTo(1);
      try (Stream<String> log = Files.lines(stack.service().log())) {
        log.filter(l -> l.contains(" started in ")).forEach(l -> System.out.println("image entrypoint: " + l));
      }
    }
    assertThat(files(rootfs)).as("files outside /tmp after serving").isEqualTo(before);
  }

  /** Every path under {@code rootfs} but /tmp, /proc and /dev, with its size. */
  private static Set<String> files(Path rootfs) throws IOException {
    try (Stream<Path> all = Files.walk(rootfs)) {
      return all.filter(p -> !p.startsWith(rootfs.resolve("tmp")) && !p.startsWith(rootfs.resolve("proc"))
              && !p.startsWith(rootfs.resolve("dev")))
          .map(p -> rootfs.relativize(p) + " " + p.toFile().length())
          .collect(Collectors.toCollection(TreeSet::new));
    }
  }
}
