package io.disaggusage.extproc.config;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Locale;
import java.util.Set;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

/**
 * Writes a configuration tree as the YAML {@link ConfigLoader#toYaml} promises: one line per key under
 * its section (subsection keys dotted, {@code tls.cert_file}), lists in flow style, strings plain
 * only where YAML reads them back as the same string.
 */
final class ConfigYamlWriter {

  /** A plain YAML scalar that reads back as the same string outside and inside a flow list. */
  private static final Pattern PLAIN_YAML = Pattern.compile("[A-Za-z_/][A-Za-z0-9_./@+-]*");
  /** The same, outside flow lists, where {@code :} not followed by a space is plain text (URIs). */
  private static final Pattern PLAIN_YAML_BLOCK = Pattern.compile("[A-Za-z_/][A-Za-z0-9_./:@+-]*");
  /** Plain words YAML 1.1 reads as booleans or null. */
  private static final Set<String> YAML_WORDS =
      Set.of("true", "false", "yes", "no", "y", "n", "on", "off", "null");

  private ConfigYamlWriter() {}

  /** The keys of {@code tree} (canonical values, as {@link ConfigKey} reads them) as YAML. */
  static String write(JsonNode tree) {
    return write(tree, false);
  }

  /** As {@link #write(JsonNode)}; with {@code masked}, the secret part of each value as {@code ***}. */
  static String write(JsonNode tree, boolean masked) {
    StringBuilder yaml = new StringBuilder();
    String section = null;
    for (ConfigKey key : ConfigKey.ALL) {
      String path = key.path();
      if (!path.startsWith(section + ".")) {
        section = path.substring(0, path.indexOf('.'));
        yaml.append(section).append(":\n");
      }
      yaml.append("  ")
          .append(path, section.length() + 1, path.length())
          .append(": ")
          .append(value(key, tree.at(key.pointer()), masked))
          .append('\n');
    }
    return yaml.toString();
  }

  private static String value(ConfigKey key, JsonNode node, boolean masked) {
    java.util.function.UnaryOperator<String> shown = masked ? key::masked : text -> text;
    return switch (key.kind()) {
      case STRING, ENUM -> string(shown.apply(key.format(node)), PLAIN_YAML_BLOCK);
      case LIST -> ConfigKey.items(node).map(item -> string(shown.apply(item), PLAIN_YAML)).collect(Collectors.joining(", ", "[", "]"));
      default -> key.format(node);
    };
  }

  /** {@code text} plain when that is unambiguous, else double-quoted with JSON-compatible escapes. */
  private static String string(String text, Pattern plain) {
    if (plain.matcher(text).matches()
        && !text.endsWith(":")
        && !YAML_WORDS.contains(text.toLowerCase(Locale.ROOT))) {
      return text;
    }
    StringBuilder quoted = new StringBuilder(text.length() + 2).append('"');
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      int type = Character.getType(c);
      if (c == '"' || c == '\\') {
        quoted.append('\\').append(c);
      } else if (c == '\n') {
        quoted.append("\\n");
      } else if (c == '\t') {
        quoted.append("\\t");
      } else if (c == '\r') {
        quoted.append("\\r");
      } else if (Character.isISOControl(c)
          || type == Character.FORMAT
          || type == Character.LINE_SEPARATOR
          || type == Character.PARAGRAPH_SEPARATOR
          || type == Character.UNASSIGNED) {
        quoted.append(String.format("\\u%04x", (int) c));
      } else {
        quoted.append(c);
      }
    }
    return quoted.append('"').toString();
  }
}
