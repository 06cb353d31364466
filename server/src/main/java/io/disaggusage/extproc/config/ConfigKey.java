package io.disaggusage.extproc.config;

import com.fasterxml.jackson.core.JsonPointer;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.BooleanNode;
import com.fasterxml.jackson.databind.node.IntNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.LongNode;
import com.fasterxml.jackson.databind.node.TextNode;
import java.lang.reflect.RecordComponent;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import java.util.stream.StreamSupport;

/**
 * One configuration key, derived from the {@link Config} record component that declares it: its full
 * key, how its value is written, and its {@link Config.Default}. Turns what an operator wrote (a YAML
 * node, or the text of a variable or flag) into the value's canonical tree node — an integer, a
 * boolean, a string, a list of strings, an enum constant's name, a duration in {@link
 * ConfigLoader#formatDuration} form — which Jackson binds into the records; and formats such a node
 * back.
 *
 * @param path full key, e.g. {@code grpc.tls.cert_file}
 * @param kind how the value is written
 * @param type the component's class (the enum class of an {@link Kind#ENUM})
 * @param defaultText the embedded default, as written in an environment variable
 * @param secret the part of the value that may be a secret ({@link Config.Secret}), or null
 */
record ConfigKey(String path, Kind kind, Class<?> type, String defaultText, Config.Secret.Part secret) {

  private static final PropertyNamingStrategies.NamingBase SNAKE_CASE =
      (PropertyNamingStrategies.NamingBase) PropertyNamingStrategies.SNAKE_CASE;

  private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

  /** The kind of each supported component type but enums and {@link Config.Bytes} sizes. */
  private static final Map<Class<?>, Kind> KINDS =
      Map.of(
          int.class, Kind.INT,
          long.class, Kind.COUNT,
          Duration.class, Kind.DURATION,
          boolean.class, Kind.BOOL,
          String.class, Kind.STRING,
          List.class, Kind.LIST);

  /** Every key, in declaration order: sections as in {@link Config}, keys as in each section. */
  static final List<ConfigKey> ALL = List.copyOf(declaredIn(Config.class, ""));

  static final Map<String, ConfigKey> BY_PATH = index(ConfigKey::path);
  static final Map<String, ConfigKey> BY_ENV = index(ConfigKey::envName);

  /** The sections, in declaration order: {@code grpc}, {@code admin}, ... */
  static final Set<String> SECTIONS =
      ALL.stream()
          .map(k -> k.path().substring(0, k.path().indexOf('.')))
          .collect(Collectors.toCollection(LinkedHashSet::new));

  /** How a value is written; {@link #expected} is what an error message says was expected. */
  enum Kind {
    INT("an integer", "integer"),
    COUNT("an integer", "integer"),
    SIZE("a size", "size"),
    DURATION("a duration", "duration"),
    BOOL("true or false", "boolean"),
    STRING("a string", "string"),
    LIST("a list of strings", "list of strings"),
    ENUM("one of", null);

    final String expected;
    final String typeName;

    Kind(String expected, String typeName) {
      this.expected = expected;
      this.typeName = typeName;
    }
  }

  private static List<ConfigKey> declaredIn(Class<?> record, String prefix) {
    List<ConfigKey> keys = new ArrayList<>();
    for (RecordComponent component : record.getRecordComponents()) {
      String path = prefix + SNAKE_CASE.translate(component.getName());
      if (component.getType().isRecord()) {
        keys.addAll(declaredIn(component.getType(), path + "."));
        continue;
      }
      Config.Default declared = component.getAnnotation(Config.Default.class);
      if (declared == null) {
        throw new IllegalStateException("configuration key " + path + " declares no @Default");
      }
      Config.Secret secret = component.getAnnotation(Config.Secret.class);
      keys.add(new ConfigKey(
          path, kindOf(component, path), component.getType(), declared.value(), secret == null ? null : secret.value()));
    }
    return keys;
  }

  private static Kind kindOf(RecordComponent component, String path) {
    Class<?> type = component.getType();
    Kind kind =
        type.isEnum()
            ? Kind.ENUM
            : component.isAnnotationPresent(Config.Bytes.class) ? Kind.SIZE : KINDS.get(type);
    if (kind == null) {
      throw new IllegalStateException("configuration key " + path + " has unsupported type " + type);
    }
    return kind;
  }

  private static Map<String, ConfigKey> index(Function<ConfigKey, String> name) {
    return ALL.stream()
        .collect(
            Collectors.toMap(
                name,
                k -> k,
                (a, b) -> {
                  throw new IllegalStateException(a.path() + " and " + b.path() + " share a name");
                },
                LinkedHashMap::new));
  }

  /** {@code text}, one value or list item of this key as written, with its secret part shown as {@code ***}. */
  String masked(String text) {
    if (secret == null || text.isEmpty()) {
      return text;
    }
    return switch (secret) {
      case URI_CREDENTIALS -> io.disaggusage.extproc.logtext.LogText.withoutCredentials(text);
      case ENTRY_VALUES -> text.indexOf('=') < 0 ? "***" : text.substring(0, text.indexOf('=') + 1) + "***";
    };
  }

  /** True when {@code path} groups further keys, as {@code grpc.tls} groups {@code grpc.tls.cert_file}. */
  static boolean isSubsection(String path) {
    return ALL.stream().anyMatch(k -> k.path().startsWith(path + "."));
  }

  /** {@code DISAGG_USAGE_} and the key in upper snake case: {@code DISAGG_USAGE_STORE_TTL}. */
  String envName() {
    return envName(path);
  }

  /** {@link #envName()} of the key {@code path}. */
  static String envName(String path) {
    return ConfigLoader.ENV_PREFIX + path.replace('.', '_').toUpperCase(Locale.ROOT);
  }

  /** Where the value sits in the configuration tree: {@code /grpc/tls/cert_file}. */
  JsonPointer pointer() {
    return JsonPointer.compile("/" + path.replace('.', '/'));
  }

  /** What the documentation calls the type, e.g. {@code duration}, {@code one of: memory, redis}. */
  String typeName() {
    return kind == Kind.ENUM ? expected() : kind.typeName;
  }

  /**
   * The canonical node of a YAML value.
   *
   * @throws IllegalArgumentException saying what was expected and what was found
   */
  JsonNode read(JsonNode node) {
    switch (kind) {
      case LIST -> {
        if (node.isNull()) {
          return NODES.arrayNode();
        }
        if (!node.isArray()) {
          throw new IllegalArgumentException("expected a list of strings, got " + describe(node));
        }
        ArrayNode items = NODES.arrayNode();
        for (int i = 0; i < node.size(); i++) {
          JsonNode item = node.get(i);
          if (!item.isValueNode() || item.isNull()) {
            throw new IllegalArgumentException(
                "expected a list of strings, item " + (i + 1) + " is " + describe(item));
          }
          items.add(item.asText());
        }
        return items;
      }
      case BOOL -> {
        if (node.isBoolean()) {
          return node;
        }
      }
      case INT, COUNT, SIZE -> {
        if (node.isIntegralNumber()) {
          if (!node.canConvertToLong()) {
            throw new IllegalArgumentException(node + " is out of range");
          }
          return narrow(node.longValue(), node.toString());
        }
      }
      case DURATION -> {
        if (node.isNumber()) {
          throw new IllegalArgumentException(
              "invalid duration " + node + " (a unit is required); " + ConfigLoader.DURATION_HINT);
        }
      }
      case STRING -> {
        if (node.isValueNode() && !node.isNull()) {
          return TextNode.valueOf(node.asText());
        }
      }
      case ENUM -> {
        // Textual values are handled below. YAML 1.1 reads an unquoted `off` as false.
        if (node.isBoolean() && !node.booleanValue() && constants().contains("OFF")) {
          return TextNode.valueOf("OFF");
        }
      }
    }
    if (node.isTextual()) {
      return read(node.textValue());
    }
    throw new IllegalArgumentException("expected " + expected() + ", got " + describe(node));
  }

  /**
   * The canonical node of a value written as text (an environment variable, a flag, a default); a
   * list is comma-separated there.
   *
   * @throws IllegalArgumentException naming the text and what was expected
   */
  JsonNode read(String text) {
    String s = text.trim();
    return switch (kind) {
      case INT, COUNT -> {
        long value;
        try {
          value = Long.parseLong(s);
        } catch (NumberFormatException e) {
          throw new IllegalArgumentException("invalid integer \"" + text + "\"");
        }
        yield narrow(value, s);
      }
      case SIZE -> narrow(ConfigLoader.parseSize(s), s);
      case DURATION -> TextNode.valueOf(ConfigLoader.formatDuration(ConfigLoader.parseDuration(text)));
      case BOOL -> {
        if (s.equalsIgnoreCase("true") || s.equalsIgnoreCase("false")) {
          yield BooleanNode.valueOf(s.equalsIgnoreCase("true"));
        }
        throw new IllegalArgumentException("invalid boolean \"" + text + "\"; expected true or false");
      }
      case STRING -> TextNode.valueOf(text);
      case LIST -> {
        ArrayNode items = NODES.arrayNode();
        Arrays.stream(text.split(",")).map(String::trim).filter(item -> !item.isEmpty()).forEach(items::add);
        yield items;
      }
      case ENUM ->
          constants().stream()
              .filter(constant -> constant.equalsIgnoreCase(s))
              .findFirst()
              .map(TextNode::valueOf)
              .orElseThrow(
                  () -> new IllegalArgumentException("invalid value \"" + text + "\"; expected " + expected()));
    };
  }

  /**
   * A canonical node as the documentation and {@code --help} show it: sizes with their unit, lists in
   * brackets, enum constants in lower case.
   */
  String format(JsonNode node) {
    return switch (kind) {
      case SIZE -> formatSize(node.longValue());
      case LIST -> items(node).collect(Collectors.joining(", ", "[", "]"));
      case ENUM -> node.textValue().toLowerCase(Locale.ROOT);
      default -> node.asText();
    };
  }

  /** The text values of a list node, in order. */
  static Stream<String> items(JsonNode list) {
    return StreamSupport.stream(list.spliterator(), false).map(JsonNode::asText);
  }

  private JsonNode narrow(long value, String text) {
    if (kind == Kind.COUNT) {
      return LongNode.valueOf(value);
    }
    if (value < Integer.MIN_VALUE || value > Integer.MAX_VALUE) {
      throw new IllegalArgumentException(text + " is out of range (at most " + Integer.MAX_VALUE + ")");
    }
    return IntNode.valueOf((int) value);
  }

  private List<String> constants() {
    return Arrays.stream(type.getEnumConstants()).map(c -> ((Enum<?>) c).name()).toList();
  }

  private String expected() {
    return kind != Kind.ENUM
        ? kind.expected
        : constants().stream()
            .map(c -> c.toLowerCase(Locale.ROOT))
            .collect(Collectors.joining(", ", "one of: ", ""));
  }

  private static String formatSize(long bytes) {
    if (bytes > 0 && bytes % (1024 * 1024) == 0) {
      return bytes / (1024 * 1024) + "MiB";
    }
    if (bytes > 0 && bytes % 1024 == 0) {
      return bytes / 1024 + "KiB";
    }
    return Long.toString(bytes);
  }

  /** A YAML node as an error message names it. */
  static String describe(JsonNode node) {
    if (node.isObject()) {
      return "a mapping";
    }
    if (node.isArray()) {
      return "a list";
    }
    if (node.isNull()) {
      return "nothing (null)";
    }
    if (node.isTextual()) {
      return "\"" + node.textValue() + "\"";
    }
    return node.toString();
  }
}
