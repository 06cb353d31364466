package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.testkit.InstalledTools;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import org.junit.jupiter.api.Test;

/**
 * The shipped jar is licensed as the repository is: the project's LICENSE as {@code META-INF/LICENSE}
 * (no bundled component's in its place), the project's NOTICE at the head of {@code META-INF/NOTICE},
 * and that NOTICE names every third-party component whose classes the jar bundles (by the packages
 * it lists for each).
 */
class ShippedJarLicenseTest {
  private static final Pattern PACKAGES = Pattern.compile("\\(packages: ([^)]*)\\)");

  @Test
  void jarCarriesTheProjectsLicenseAndNotice() throws IOException {
    Path root = InstalledTools.root();
    try (ZipFile jar = new ZipFile(InstalledTools.serviceJar().toFile())) {
      assertThat(read(jar, "META-INF/LICENSE")).isEqualTo(Files.readString(root.resolve("LICENSE")));
      assertThat(read(jar, "META-INF/NOTICE")).startsWith(Files.readString(root.resolve("NOTICE")).strip());
    }
  }

  @Test
  void noticeNamesEveryBundledComponent() throws IOException {
    List<String> listed = listedPackages(Files.readString(InstalledTools.root().resolve("NOTICE")));
    assertThat(listed).as("packages listed in NOTICE").hasSizeGreaterThan(20);
    Set<String> unlisted = new TreeSet<>();
    try (ZipFile jar = new ZipFile(InstalledTools.serviceJar().toFile())) {
      jar.stream().map(ZipEntry::getName)
          .filter(name -> name.endsWith(".class") && !name.startsWith("META-INF/") && !name.startsWith("io/disaggusage/"))
          .map(name -> name.replace('/', '.'))
          .filter(name -> listed.stream().noneMatch(name::startsWith))
          .map(name -> name.substring(0, Math.max(0, name.lastIndexOf('.', name.length() - 7))))
          .forEach(unlisted::add);
    }
    assertThat(unlisted).as("packages in the jar that NOTICE does not attribute").isEmpty();
  }

  /** "a, b." from each "(packages: ...)"; a name ending in "." is a prefix as it is, others get a ".". */
  static List<String> listedPackages(String notice) {
    List<String> out = new ArrayList<>();
    Matcher m = PACKAGES.matcher(notice.replaceAll("\\s+", " "));
    while (m.find()) {
      for (String p : m.group(1).split(",")) {
        String name = p.trim();
        out.add(name.endsWith(".") ? name : name + ".");
      }
    }
    return out;
  }

  private static String read(ZipFile jar, String entry) throws IOException {
    ZipEntry e = jar.getEntry(entry);
    assertThat(e).as(entry + " in the jar").isNotNull();
    try (InputStream in = jar.getInputStream(e)) {
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
  }
}
