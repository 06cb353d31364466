package io.disaggusage.extproc.config;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.disaggusage.extproc.Main;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;
import picocli.CommandLine.Model.OptionSpec;

/**
 * {@code docs/configuration.md} cannot drift from the code: its key table is compared with {@link
 * ConfigLoader#describeKeys()} row by row, and every command-line flag must be documented; the README's
 * configuration block lists exactly the same keys.
 */
class ConfigurationDocTest {


  /** One row of the key table. */
  record Row(String key, String type, String defaultValue, String envName, String meaning) {}

  static String doc;
  static Map<String, Row> rows;

  @BeforeAll
  static void read() throws IOException {
    String root = System.getProperty("project.root");
    assertThat(root).as("system property project.root (set by server/pom.xml)").isNotNull();
    doc = Files.readString(Path.of(root, "docs", "configuration.md"));
    rows = new LinkedHashMap<>();
    for (String line : doc.lines().toList()) {
      if (!line.startsWith("| `")) {
        continue;
      }
      List<String> cells = cells(line);
      if (cells.size() != 5 || !cells.get(3).startsWith("`DISAGG_USAGE_")) {
        continue; // another table (flags, formats)
      }
      Row row = new Row(unquote(cells.get(0)), cells.get(1), unquote(cells.get(2)), unquote(cells.get(3)), cells.get(4));
      assertThat(rows.put(row.key(), row)).as("duplicate row for %s", row.key()).isNull();
    }
  }

  @Test
  void everyKeyHasARowWithItsTypeDefaultAndEnvironmentVariable() {
    List<String> problems = new ArrayList<>();
    for (ConfigLoader.KeyInfo key : ConfigLoader.describeKeys()) {
      Row row = rows.get(key.key());
      String expected =
          "| `" + key.key() + "` | " + key.type() + " | `" + shown(key.defaultValue()) + "` | `" + key.envName() + "` | ... |";
      if (row == null) {
        problems.add("missing row: " + expected);
        continue;
      }
      if (!row.envName().equals(key.envName())
          || !row.type().equals(key.type())
          || !row.defaultValue().equals(shown(key.defaultValue()))
          || row.meaning().isBlank()) {
        problems.add("row differs for " + key.key() + ", expected " + expected);
      }
    }
    assertThat(problems).as("docs/configuration.md key table").isEmpty();
  }

  @Test
  void everyDocumentedKeyExists() {
    for (Row row : rows.values()) {
      assertThat(ConfigLoader.keys().contains(row.key()))
          .as("docs/configuration.md documents %s, which is not a key", row.key())
          .isTrue();
      assertThat(row.envName()).isEqualTo(ConfigLoader.envName(row.key()));
    }
  }

  @Test
  void everyFlagAndSpecialVariableIsDocumented() {
    CommandLine commandLine = Main.commandLine(new Main(Map.of()));
    List<String> flags =
        commandLine.getCommandSpec().options().stream()
            .map(OptionSpec::longestName)
            .collect(Collectors.toList());
    assertThat(flags).contains("--print-config", "--log-level", "--config", "--set");
    for (String flag : flags) {
      assertThat(doc).as("flag %s", flag).contains("`" + flag);
    }
    assertThat(doc)
        .contains(
            ConfigLoader.ENV_CONFIG_FILE,
            ConfigLoader.ENV_LOG_LEVEL,
            "## `--print-config`",
            "io.disaggusage.extproc.exchanges");
  }

  /** The README's configuration block is the one a reader copies: it lists exactly the keys --help lists. */
  @Test
  void readmeConfigurationBlockListsExactlyTheKeys() throws IOException {
    String readme = Files.readString(Path.of(System.getProperty("project.root"), "README.md"));
    int section = readme.indexOf("\n## Configuration\n");
    assertThat(section).as("README section Configuration").isPositive();
    int start = readme.indexOf("```yaml\n", section) + "```yaml\n".length();
    String block = readme.substring(start, readme.indexOf("```", start));
    JsonNode tree = new ObjectMapper(new YAMLFactory()).readTree(block);
    List<String> keys = new ArrayList<>();
    flatten(tree, "", keys);
    assertThat(keys).containsExactlyInAnyOrderElementsOf(ConfigLoader.keys());
  }

  private static void flatten(JsonNode node, String prefix, List<String> out) {
    if (!node.isObject()) {
      out.add(prefix);
      return;
    }
    node.fields().forEachRemaining(e -> flatten(e.getValue(), prefix.isEmpty() ? e.getKey() : prefix + "." + e.getKey(), out));
  }

  /** An empty default is written as {@code ""} in the table. */
  private static String shown(String defaultValue) {
    return defaultValue.isEmpty() ? "\"\"" : defaultValue;
  }

  private static List<String> cells(String line) {
    String inner = line.strip();
    inner = inner.substring(1, inner.length() - 1);
    List<String> cells = new ArrayList<>();
    for (String cell : inner.split("\\|", -1)) {
      cells.add(cell.strip());
    }
    return cells;
  }

  private static String unquote(String cell) {
    return cell.length() >= 2 && cell.startsWith("`") && cell.endsWith("`")
        ? cell.substring(1, cell.length() - 1)
        : cell;
  }
}
