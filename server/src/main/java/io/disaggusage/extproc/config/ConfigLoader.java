package io.disaggusage.extproc.config;

import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.time.format.DateTimeParseException;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

/**
 * Builds a validated {@link Config} from, lowest to highest precedence: each key's {@link
 * Config.Default}, an optional YAML file, environment variables, and command-line settings.
 *
 * <p>Keys are {@code section.key} in snake_case ({@code ordering.context_wait}), derived from the
 * {@link Config} records ({@link ConfigKey}). The environment variable for a key is {@code
 * DISAGG_USAGE_} plus the key in upper snake case ({@code DISAGG_USAGE_ORDERING_CONTEXT_WAIT}); list
 * values are comma-separated there. Durations are written {@code 250ms}, {@code 2s}, {@code 1m},
 * {@code 1h} (combinable: {@code 1m30s}) or ISO-8601 ({@code PT2S}); sizes as plain bytes or with a
 * {@code KiB}/{@code MiB}/{@code GiB} suffix; enum values are case-insensitive.
 *
 * <p>Each layer's values are read key by key into one configuration tree, which Jackson then binds
 * into the records. Unknown keys, wrong types and invalid values are reported all at once as a {@link
 * ConfigException} whose lines each name the full key and where the value came from.
 */
public final class ConfigLoader {

  /** Prefix of every environment variable the service reads. */
  public static final String ENV_PREFIX = "DISAGG_USAGE_";

  /** Environment variable naming the YAML file; the {@code --config} flag wins over it. */
  public static final String ENV_CONFIG_FILE = ENV_PREFIX + "CONFIG";

  /**
   * Environment variable of the {@code --log-level} flag: sets {@code logging.level} after every other
   * environment variable (so it wins over {@code DISAGG_USAGE_LOGGING_LEVEL}); flags win over it.
   */
  public static final String ENV_LOG_LEVEL = ENV_PREFIX + "LOG_LEVEL";

  /**
   * Environment variable of the {@code --on-startup-failure} flag: read by the command line before the
   * configuration (it decides what a configuration error does), so it is not a configuration key.
   */
  public static final String ENV_ON_STARTUP_FAILURE = ENV_PREFIX + "ON_STARTUP_FAILURE";

  /**
   * One command-line setting.
   *
   * @param key full key, e.g. {@code grpc.port}
   * @param value the value as written on the command line
   * @param source how it was given, for error messages, e.g. {@code --grpc-port}
   */
  public record Setting(String key, String value, String source) {
    public Setting {
      Objects.requireNonNull(key, "key");
      Objects.requireNonNull(value, "value");
      Objects.requireNonNull(source, "source");
    }
  }

  /**
   * One configuration key, for help texts and documentation.
   *
   * @param key full key, e.g. {@code store.ttl}
   * @param envName its environment variable
   * @param defaultValue the embedded default, formatted as it would be written in YAML
   * @param type what the value is, e.g. {@code duration}, {@code one of: memory, redis}
   */
  public record KeyInfo(String key, String envName, String defaultValue, String type) {}

  static final String DURATION_HINT = "expected e.g. 250ms, 2s, 1m, 1h, 1m30s or ISO-8601 PT2S";
  private static final String SIZE_HINT = "expected bytes or a KiB, MiB or GiB suffix, e.g. 65536, 64KiB, 16MiB";
  private static final Pattern DURATION_PART = Pattern.compile("(\\d+)(ms|h|m|s)", Pattern.CASE_INSENSITIVE);
  private static final Pattern SIZE = Pattern.compile("(\\d+)\\s*(b|kib|mib|gib)?", Pattern.CASE_INSENSITIVE);

  /** Variables Kubernetes injects for a Service named {@code disagg-usage}; never config keys. */
  private static final Pattern KUBERNETES_SERVICE_LINK =
      Pattern.compile(
          "DISAGG_USAGE_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_\\d+_(TCP|UDP|SCTP)(_(PORT|PROTO|ADDR))?)?)");

  private ConfigLoader() {}

  /**
   * Loads the configuration.
   *
   * @param file YAML file, or {@code null} for none
   * @param env the process environment (only {@code DISAGG_USAGE_*} entries are read)
   * @param settings command-line settings, applied in order after everything else
   * @throws ConfigException listing every problem found
   */
  public static Config load(Path file, Map<String, String> env, List<Setting> settings)
      throws ConfigException {
    Loader loader = new Loader();
    if (file != null) {
      loader.applyFile(file);
    }
    loader.applyEnv(env);
    for (Setting setting : settings) {
      loader.applySetting(setting);
    }
    return loader.finish();
  }

  /** {@link #load(Path, Map, List)} without command-line settings. */
  public static Config load(Path file, Map<String, String> env) throws ConfigException {
    return load(file, env, List.of());
  }

  /** A configuration from YAML text alone (defaults underneath, no environment); for tests and tools. */
  public static Config fromYaml(String yaml) throws ConfigException {
    Loader loader = new Loader();
    loader.applyYaml(yaml, "in YAML");
    return loader.finish();
  }

  /** Every key, in documentation order. */
  public static List<String> keys() {
    return ConfigKey.ALL.stream().map(ConfigKey::path).toList();
  }

  /** The environment variable for a key: {@code store.ttl} → {@code DISAGG_USAGE_STORE_TTL}. */
  public static String envName(String key) {
    return ConfigKey.envName(key);
  }

  /** Every key with its environment variable and default. */
  public static List<KeyInfo> describeKeys() {
    return ConfigKey.ALL.stream()
        .map(k -> new KeyInfo(k.path(), k.envName(), k.format(ConfigTree.DEFAULT.at(k.pointer())), k.typeName()))
        .toList();
  }

  /**
   * The configuration as YAML: every key, sections and keys in documentation order, durations and sizes
   * in the form the loader reads ({@code 2s}, {@code 16MiB}). {@link #fromYaml} of the result gives back
   * an equal {@link Config}, so the text can be used as a {@code --config} file.
   */
  public static String toYaml(Config config) {
    return ConfigYamlWriter.write(ConfigTree.of(config));
  }

  /**
   * {@link #toYaml} with every secret shown as {@code ***} (a URI's user and password, each header's
   * value: the keys marked {@link Config.Secret}): what {@code --print-config} prints, which people
   * paste into tickets and logs keep.
   */
  public static String toPrintableYaml(Config config) {
    return ConfigYamlWriter.write(ConfigTree.of(config), true);
  }

  /**
   * Parses a duration: {@code 250ms}, {@code 2s}, {@code 1m}, {@code 1h}, combinations such as {@code
   * 1m30s}, or ISO-8601 such as {@code PT2S}.
   *
   * @throws IllegalArgumentException naming the text when it is not a duration
   */
  public static Duration parseDuration(String text) {
    String s = text.trim();
    IllegalArgumentException invalid =
        new IllegalArgumentException("invalid duration \"" + text + "\"; " + DURATION_HINT);
    if (s.isEmpty()) {
      throw invalid;
    }
    char first = Character.toUpperCase(s.charAt(0));
    if (first == 'P' || ((first == '-' || first == '+') && s.length() > 1)) {
      try {
        return Duration.parse(s);
      } catch (DateTimeParseException e) {
        throw invalid;
      }
    }
    Matcher m = DURATION_PART.matcher(s);
    Duration total = Duration.ZERO;
    int pos = 0;
    try {
      while (pos < s.length()) {
        m.region(pos, s.length());
        if (!m.lookingAt()) {
          throw invalid;
        }
        long amount = Long.parseLong(m.group(1));
        Duration part =
            switch (m.group(2).toLowerCase(Locale.ROOT)) {
              case "ms" -> Duration.ofMillis(amount);
              case "s" -> Duration.ofSeconds(amount);
              case "m" -> Duration.ofMinutes(amount);
              default -> Duration.ofHours(amount);
            };
        total = total.plus(part);
        pos = m.end();
      }
    } catch (ArithmeticException | NumberFormatException e) {
      throw invalid;
    }
    return total;
  }

  /**
   * Parses a size in bytes: {@code 65536}, {@code 64KiB}, {@code 16MiB}, {@code 1GiB}.
   *
   * @throws IllegalArgumentException naming the text when it is not a size
   */
  public static long parseSize(String text) {
    Matcher m = SIZE.matcher(text.trim());
    if (!m.matches()) {
      throw new IllegalArgumentException("invalid size \"" + text + "\"; " + SIZE_HINT);
    }
    try {
      long amount = Long.parseLong(m.group(1));
      String unit = m.group(2) == null ? "b" : m.group(2).toLowerCase(Locale.ROOT);
      long factor =
          switch (unit) {
            case "kib" -> 1024L;
            case "mib" -> 1024L * 1024;
            case "gib" -> 1024L * 1024 * 1024;
            default -> 1L;
          };
      return Math.multiplyExact(amount, factor);
    } catch (ArithmeticException | NumberFormatException e) {
      throw new IllegalArgumentException("size \"" + text + "\" is too large");
    }
  }

  /** Formats a duration the way {@link #parseDuration} reads it, e.g. {@code 2s}, {@code 250ms}. */
  public static String formatDuration(Duration d) {
    if (d.isNegative() || d.getNano() % 1_000_000 != 0 || d.getSeconds() >= Long.MAX_VALUE / 1000) {
      return d.toString();
    }
    long ms = d.toMillis();
    if (ms != 0 && ms % 3_600_000 == 0) {
      return ms / 3_600_000 + "h";
    }
    if (ms != 0 && ms % 60_000 == 0) {
      return ms / 60_000 + "m";
    }
    if (ms % 1000 == 0) {
      return ms / 1000 + "s";
    }
    return ms + "ms";
  }

  /** One load: the configuration tree so far, and what was wrong on the way. */
  private static final class Loader {
    private final ObjectNode tree = ConfigTree.DEFAULT.deepCopy();
    private final ConfigProblems problems = new ConfigProblems();

    void applyFile(Path file) {
      String text;
      try {
        text = Files.readString(file);
      } catch (NoSuchFileException e) {
        problems.add("cannot read config file " + file + ": no such file");
        return;
      } catch (IOException e) {
        problems.add("cannot read config file " + file + ": " + e);
        return;
      }
      applyYaml(text, "in " + file);
    }

    void applyYaml(String text, String origin) {
      JsonNode root;
      try {
        root = ConfigTree.MAPPER.readTree(text);
      } catch (JsonProcessingException e) {
        JsonLocation where = e.getLocation();
        String line = where == null ? "" : " at line " + where.getLineNr();
        problems.add("invalid YAML" + line + ": " + e.getOriginalMessage() + " (" + origin + ")");
        return;
      }
      if (root == null || root.isMissingNode() || root.isNull()) {
        return;
      }
      if (!root.isObject()) {
        problems.add(
            "the top level must be a mapping of sections ("
                + String.join(", ", ConfigKey.SECTIONS)
                + "), got "
                + ConfigKey.describe(root)
                + " ("
                + origin
                + ")");
        return;
      }
      for (Map.Entry<String, JsonNode> section : root.properties()) {
        String name = section.getKey();
        if (!ConfigKey.SECTIONS.contains(name)) {
          problems.add("unknown key " + name + suggestion(name, ConfigKey.SECTIONS) + " (" + origin + ")");
          continue;
        }
        applyMapping(name, section.getValue(), origin);
      }
    }

    /** The fields of section or subsection {@code prefix} (e.g. {@code grpc}, {@code grpc.tls}). */
    private void applyMapping(String prefix, JsonNode body, String origin) {
      if (body.isNull()) {
        return;
      }
      if (!body.isObject()) {
        problems.add(prefix + ": expected a mapping, got " + ConfigKey.describe(body) + " (" + origin + ")");
        return;
      }
      for (Map.Entry<String, JsonNode> field : body.properties()) {
        String path = prefix + "." + field.getKey();
        ConfigKey key = ConfigKey.BY_PATH.get(path);
        if (key != null) {
          apply(key, origin, () -> key.read(field.getValue()));
        } else if (ConfigKey.isSubsection(path)) {
          applyMapping(path, field.getValue(), origin);
        } else {
          problems.add("unknown key " + path + suggestion(path, ConfigKey.BY_PATH.keySet()) + " (" + origin + ")");
        }
      }
    }

    void applyEnv(Map<String, String> env) {
      for (Map.Entry<String, String> entry : new TreeMap<>(env).entrySet()) {
        String name = entry.getKey();
        if (!name.startsWith(ENV_PREFIX)
            || name.equals(ENV_CONFIG_FILE)
            || name.equals(ENV_LOG_LEVEL)
            || name.equals(ENV_ON_STARTUP_FAILURE)
            || KUBERNETES_SERVICE_LINK.matcher(name).matches()) {
          continue;
        }
        ConfigKey key = ConfigKey.BY_ENV.get(name);
        if (key == null) {
          problems.add(
              "unknown key "
                  + name
                  + suggestion(name, ConfigKey.BY_ENV.keySet())
                  + " (environment variable; keys are "
                  + ENV_PREFIX
                  + "<SECTION>_<KEY>, e.g. "
                  + ConfigKey.ALL.get(0).envName()
                  + ")");
          continue;
        }
        apply(key, "from " + name, () -> key.read(entry.getValue()));
      }
      String logLevel = env.get(ENV_LOG_LEVEL);
      if (logLevel != null && !logLevel.isBlank()) {
        ConfigKey key = ConfigKey.BY_PATH.get("logging.level");
        apply(key, "from " + ENV_LOG_LEVEL, () -> key.read(logLevel));
      }
    }

    void applySetting(Setting setting) {
      String origin = "from " + setting.source();
      ConfigKey key = ConfigKey.BY_PATH.get(setting.key());
      if (key == null) {
        problems.add(
            "unknown key " + setting.key() + suggestion(setting.key(), ConfigKey.BY_PATH.keySet()) + " (" + origin + ")");
        return;
      }
      apply(key, origin, () -> key.read(setting.value()));
    }

    /** Puts the value {@code read} gives into the tree, or reports why it cannot be read. */
    private void apply(ConfigKey key, String origin, Supplier<JsonNode> read) {
      try {
        ConfigTree.put(tree, key, read.get());
        problems.read(key.path(), origin);
      } catch (IllegalArgumentException e) {
        problems.unreadable(key.path(), e.getMessage(), origin);
      }
    }

    Config finish() throws ConfigException {
      Config config = ConfigTree.bind(tree);
      new ConfigValidator(problems).validate(config);
      problems.throwIfAny();
      return config;
    }
  }

  /** {@code " (did you mean x?)"} for the closest candidate within a small edit distance, else empty. */
  private static String suggestion(String unknown, Iterable<String> candidates) {
    String best = null;
    int bestDistance = Integer.MAX_VALUE;
    for (String candidate : candidates) {
      int d = editDistance(unknown.toLowerCase(Locale.ROOT), candidate.toLowerCase(Locale.ROOT));
      if (d < bestDistance) {
        bestDistance = d;
        best = candidate;
      }
    }
    return best != null && bestDistance <= 3 && bestDistance <= unknown.length() / 2
        ? " (did you mean " + best + "?)"
        : "";
  }

  private static int editDistance(String a, String b) {
    int[] previous = new int[b.length() + 1];
    int[] current = new int[b.length() + 1];
    for (int j = 0; j <= b.length(); j++) {
      previous[j] = j;
    }
    for (int i = 1; i <= a.length(); i++) {
      current[0] = i;
      for (int j = 1; j <= b.length(); j++) {
        int cost = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
        current[j] = Math.min(Math.min(current[j - 1] + 1, previous[j] + 1), previous[j - 1] + cost);
      }
      int[] swap = previous;
      previous = current;
      current = swap;
    }
    return previous[b.length()];
  }
}
