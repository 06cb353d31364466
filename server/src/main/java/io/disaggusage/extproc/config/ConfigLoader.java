package io.disaggusage.extproc.config;

import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

/**
 * Builds a validated {@link Config} from, lowest to highest precedence: {@link Config#defaults()}, an
 * optional YAML file, environment variables, and command-line settings.
 *
 * <p>Keys are {@code section.key} in snake_case ({@code ordering.context_wait}). The environment variable
 * for a key is {@code DISAGG_USAGE_} plus the key in upper snake case ({@code
 * DISAGG_USAGE_ORDERING_CONTEXT_WAIT}); list values are comma-separated there. Durations are written
 * {@code 250ms}, {@code 2s}, {@code 1m}, {@code 1h} (combinable: {@code 1m30s}) or ISO-8601 ({@code
 * PT2S}); sizes as plain bytes or with a {@code KiB}/{@code MiB}/{@code GiB} suffix; enum values are
 * case-insensitive.
 *
 * <p>Unknown keys, wrong types and invalid values are reported all at once as a {@link
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

  /** Upper bound of {@code ordering.context_wait}. */
  public static final Duration MAX_CONTEXT_WAIT = Duration.ofHours(1);

  /** Upper bound of {@code shutdown.drain_timeout}. */
  public static final Duration MAX_DRAIN_TIMEOUT = Duration.ofHours(1);

  /** Upper bound of the gRPC connection durations (keepalive, idle, certificate reload). */
  public static final Duration MAX_CONNECTION_DURATION = Duration.ofHours(24);

  /** Lower bound of {@code grpc.tls.reload_interval}: re-reading files more often gains nothing. */
  public static final Duration MIN_TLS_RELOAD_INTERVAL = Duration.ofMillis(100);

  /** The largest {@code store.redis_timeout}: a slow Redis must never hold LLM traffic longer. */
  public static final Duration MAX_REDIS_TIMEOUT = Duration.ofSeconds(5);

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

  private enum Kind {
    INT("an integer"),
    COUNT("an integer"),
    SIZE("a size"),
    DURATION("a duration"),
    BOOL("true or false"),
    STRING("a string"),
    LIST("a list of strings"),
    ENUM("one of");

    final String expected;

    Kind(String expected) {
      this.expected = expected;
    }
  }

  private record Key(
      String path, Kind kind, Class<? extends Enum<?>> enumType, Function<Config, Object> getter) {
    String envName() {
      return envName(path);
    }

    static String envName(String path) {
      return ENV_PREFIX + path.replace('.', '_').toUpperCase(Locale.ROOT);
    }
  }

  private static final List<Key> KEYS =
      List.of(
          key("grpc.port", Kind.INT, c -> c.grpc().port()),
          key("grpc.max_inbound_message_bytes", Kind.SIZE, c -> c.grpc().maxInboundMessageBytes()),
          key("grpc.listen", Kind.STRING, c -> c.grpc().listen()),
          key("grpc.keepalive_time", Kind.DURATION, c -> c.grpc().keepaliveTime()),
          key("grpc.keepalive_timeout", Kind.DURATION, c -> c.grpc().keepaliveTimeout()),
          key("grpc.permit_keepalive_time", Kind.DURATION, c -> c.grpc().permitKeepaliveTime()),
          key("grpc.max_concurrent_streams", Kind.INT, c -> c.grpc().maxConcurrentStreams()),
          key("grpc.max_connection_idle", Kind.DURATION, c -> c.grpc().maxConnectionIdle()),
          key("grpc.tls.cert_file", Kind.STRING, c -> c.grpc().tls().certFile()),
          key("grpc.tls.key_file", Kind.STRING, c -> c.grpc().tls().keyFile()),
          key("grpc.tls.client_ca_file", Kind.STRING, c -> c.grpc().tls().clientCaFile()),
          key("grpc.tls.reload_interval", Kind.DURATION, c -> c.grpc().tls().reloadInterval()),
          key("admin.port", Kind.INT, c -> c.admin().port()),
          key("classification.context_clusters", Kind.LIST, c -> c.classification().contextClusters()),
          key(
              "classification.generation_clusters",
              Kind.LIST,
              c -> c.classification().generationClusters()),
          key("classification.paths", Kind.LIST, c -> c.classification().paths()),
          key(
              "classification.strip_accept_encoding",
              Kind.BOOL,
              c -> c.classification().stripAcceptEncoding()),
          key("classification.trust_id_header", Kind.BOOL, c -> c.classification().trustIdHeader()),
          key("ordering.context_wait", Kind.DURATION, c -> c.ordering().contextWait()),
          new Key("ordering.fallback", Kind.ENUM, Config.Fallback.class, c -> c.ordering().fallback()),
          new Key("store.type", Kind.ENUM, Config.StoreType.class, c -> c.store().type()),
          key("store.ttl", Kind.DURATION, c -> c.store().ttl()),
          key("store.redis_uri", Kind.STRING, c -> c.store().redisUri()),
          key("store.max_entries", Kind.COUNT, c -> c.store().maxEntries()),
          key("store.key_prefix", Kind.STRING, c -> c.store().keyPrefix()),
          key("store.redis_timeout", Kind.DURATION, c -> c.store().redisTimeout()),
          key("store.redis_cluster", Kind.BOOL, c -> c.store().redisCluster()),
          key("metadata.namespace", Kind.STRING, c -> c.metadata().namespace()),
          key("limits.max_body_bytes", Kind.SIZE, c -> c.limits().maxBodyBytes()),
          key("limits.max_event_bytes", Kind.SIZE, c -> c.limits().maxEventBytes()),
          key("limits.max_usage_bytes", Kind.SIZE, c -> c.limits().maxUsageBytes()),
          key("limits.max_key_bytes", Kind.SIZE, c -> c.limits().maxKeyBytes()),
          key("metrics.models", Kind.LIST, c -> c.metrics().models()),
          key("metrics.max_models", Kind.INT, c -> c.metrics().maxModels()),
          new Key("logging.format", Kind.ENUM, Config.LogFormat.class, c -> c.logging().format()),
          new Key("logging.level", Kind.ENUM, Config.LogLevel.class, c -> c.logging().level()),
          key("shutdown.drain_timeout", Kind.DURATION, c -> c.shutdown().drainTimeout()),
          key("limits.max_waiters", Kind.INT, c -> c.waiting().maxWaiters()),
          key("streaming.inject_include_usage", Kind.BOOL, c -> c.streaming().injectIncludeUsage()));

  private static final Map<String, Key> BY_PATH =
      KEYS.stream()
          .collect(Collectors.toMap(Key::path, k -> k, (a, b) -> a, LinkedHashMap::new));
  private static final Map<String, Key> BY_ENV =
      KEYS.stream().collect(Collectors.toMap(Key::envName, k -> k));
  private static final Set<String> SECTIONS =
      KEYS.stream()
          .map(k -> k.path().substring(0, k.path().indexOf('.')))
          .collect(Collectors.toCollection(LinkedHashSet::new));

  private static final Pattern DURATION_PART = Pattern.compile("(\\d+)(ms|h|m|s)", Pattern.CASE_INSENSITIVE);
  private static final Pattern SIZE = Pattern.compile("(\\d+)\\s*(b|kib|mib|gib)?", Pattern.CASE_INSENSITIVE);
  private static final Pattern NAMESPACE = Pattern.compile("[A-Za-z0-9_.-]+");
  /** Variables Kubernetes injects for a Service named {@code disagg-usage}; never config keys. */
  private static final Pattern KUBERNETES_SERVICE_LINK =
      Pattern.compile(
          "DISAGG_USAGE_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_\\d+_(TCP|UDP|SCTP)(_(PORT|PROTO|ADDR))?)?)");
  private static final Pattern KEY_PREFIX = Pattern.compile("[A-Za-z0-9_.:-]{1,64}");
  private static final Set<String> REDIS_SCHEMES =
      Set.of("redis", "rediss", "redis-sentinel", "rediss-sentinel");

  private static final String DURATION_HINT = "expected e.g. 250ms, 2s, 1m, 1h, 1m30s or ISO-8601 PT2S";
  private static final String SIZE_HINT = "expected bytes or a KiB, MiB or GiB suffix, e.g. 65536, 64KiB, 16MiB";

  private ConfigLoader() {}

  private static Key key(String path, Kind kind, Function<Config, Object> getter) {
    return new Key(path, kind, null, getter);
  }

  /** True when {@code path} groups further keys, as {@code grpc.tls} groups {@code grpc.tls.cert_file}. */
  private static boolean isSubsection(String path) {
    String prefix = path + ".";
    return BY_PATH.keySet().stream().anyMatch(k -> k.startsWith(prefix));
  }

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
    return List.copyOf(BY_PATH.keySet());
  }

  /** The environment variable for a key: {@code store.ttl} → {@code DISAGG_USAGE_STORE_TTL}. */
  public static String envName(String key) {
    return Key.envName(key);
  }

  /** Every key with its environment variable and default. */
  public static List<KeyInfo> describeKeys() {
    Config defaults = Config.defaults();
    return KEYS.stream()
        .map(k -> new KeyInfo(k.path(), k.envName(), format(k, k.getter().apply(defaults)), typeName(k)))
        .toList();
  }

  /**
   * The configuration as YAML: every key, sections and keys in documentation order, durations and sizes
   * in the form the loader reads ({@code 2s}, {@code 16MiB}). {@link #fromYaml} of the result gives back
   * an equal {@link Config}, so the text can be used as a {@code --config} file.
   */
  public static String toYaml(Config config) {
    StringBuilder yaml = new StringBuilder();
    for (String section : SECTIONS) {
      yaml.append(section).append(":\n");
      for (Key key : KEYS) {
        String path = key.path();
        if (path.startsWith(section + ".")) {
          yaml.append("  ")
              .append(path, section.length() + 1, path.length())
              .append(": ")
              .append(yamlValue(key, key.getter().apply(config)))
              .append('\n');
        }
      }
    }
    return yaml.toString();
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
    if (d.isNegative() || d.getNano() % 1_000_000 != 0) {
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

  private static String formatSize(long bytes) {
    if (bytes > 0 && bytes % (1024 * 1024) == 0) {
      return bytes / (1024 * 1024) + "MiB";
    }
    if (bytes > 0 && bytes % 1024 == 0) {
      return bytes / 1024 + "KiB";
    }
    return Long.toString(bytes);
  }

  private static String typeName(Key key) {
    return switch (key.kind()) {
      case INT, COUNT -> "integer";
      case SIZE -> "size";
      case DURATION -> "duration";
      case BOOL -> "boolean";
      case STRING -> "string";
      case LIST -> "list of strings";
      case ENUM -> expected(key);
    };
  }

  /** A plain YAML scalar that reads back as the same string outside and inside a flow list. */
  private static final Pattern PLAIN_YAML = Pattern.compile("[A-Za-z_/][A-Za-z0-9_./@+-]*");
  /** The same, outside flow lists, where {@code :} not followed by a space is plain text (URIs). */
  private static final Pattern PLAIN_YAML_BLOCK = Pattern.compile("[A-Za-z_/][A-Za-z0-9_./:@+-]*");
  /** Plain words YAML 1.1 reads as booleans or null. */
  private static final Set<String> YAML_WORDS =
      Set.of("true", "false", "yes", "no", "y", "n", "on", "off", "null");

  private static String yamlValue(Key key, Object value) {
    return switch (key.kind()) {
      case STRING -> yamlString((String) value, PLAIN_YAML_BLOCK);
      case ENUM -> yamlString(format(key, value), PLAIN_YAML_BLOCK);
      case LIST ->
          ((List<?>) value)
              .stream()
                  .map(item -> yamlString(String.valueOf(item), PLAIN_YAML))
                  .collect(Collectors.joining(", ", "[", "]"));
      default -> format(key, value);
    };
  }

  /** {@code text} plain when that is unambiguous, else double-quoted with JSON-compatible escapes. */
  private static String yamlString(String text, Pattern plain) {
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

  private static String format(Key key, Object value) {
    return switch (key.kind()) {
      case SIZE -> formatSize(((Number) value).longValue());
      case DURATION -> formatDuration((Duration) value);
      case LIST -> {
        List<?> list = (List<?>) value;
        yield list.stream().map(String::valueOf).collect(Collectors.joining(", ", "[", "]"));
      }
      case ENUM -> ((Enum<?>) value).name().toLowerCase(Locale.ROOT);
      default -> String.valueOf(value);
    };
  }

  /** The mapper is built only when a file is read: keeps Jackson off the path of env-only start-ups. */
  private static final class Yaml {
    static final ObjectMapper MAPPER =
        new ObjectMapper(new YAMLFactory()).enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION);
  }

  /** One load: the merged values, where each came from, and the problems found so far. */
  private static final class Loader {
    private final Map<String, Object> values = new HashMap<>();
    private final Map<String, String> origins = new HashMap<>();
    private final List<String> problems = new ArrayList<>();
    /** Keys whose latest value failed to parse: validation skips them, their error says enough. */
    private final Set<String> unparsed = new HashSet<>();

    Loader() {
      Config defaults = Config.defaults();
      for (Key key : KEYS) {
        values.put(key.path(), key.getter().apply(defaults));
      }
    }

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
        root = Yaml.MAPPER.readTree(text);
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
                + String.join(", ", SECTIONS)
                + "), got "
                + describe(root)
                + " ("
                + origin
                + ")");
        return;
      }
      for (Map.Entry<String, JsonNode> section : root.properties()) {
        String name = section.getKey();
        JsonNode body = section.getValue();
        if (!SECTIONS.contains(name)) {
          problems.add("unknown key " + name + suggestion(name, SECTIONS) + " (" + origin + ")");
          continue;
        }
        applyMapping(name, body, origin);
      }
    }

    /** The fields of section or subsection {@code prefix} (e.g. {@code grpc}, {@code grpc.tls}). */
    private void applyMapping(String prefix, JsonNode body, String origin) {
      if (body.isNull()) {
        return;
      }
      if (!body.isObject()) {
        problems.add(prefix + ": expected a mapping, got " + describe(body) + " (" + origin + ")");
        return;
      }
      for (Map.Entry<String, JsonNode> field : body.properties()) {
        String path = prefix + "." + field.getKey();
        Key key = BY_PATH.get(path);
        if (key == null) {
          if (isSubsection(path)) {
            applyMapping(path, field.getValue(), origin);
          } else {
            problems.add("unknown key " + path + suggestion(path, BY_PATH.keySet()) + " (" + origin + ")");
          }
          continue;
        }
        try {
          set(key, fromNode(key, field.getValue()), origin);
        } catch (IllegalArgumentException e) {
          unparsed.add(path);
          problems.add(path + ": " + e.getMessage() + " (" + origin + ")");
        }
      }
    }

    void applyEnv(Map<String, String> env) {
      for (Map.Entry<String, String> entry : new TreeMap<>(env).entrySet()) {
        String name = entry.getKey();
        if (!name.startsWith(ENV_PREFIX)
            || name.equals(ENV_CONFIG_FILE)
            || name.equals(ENV_LOG_LEVEL)
            || KUBERNETES_SERVICE_LINK.matcher(name).matches()) {
          continue;
        }
        Key key = BY_ENV.get(name);
        String origin = "from " + name;
        if (key == null) {
          problems.add(
              "unknown key "
                  + name
                  + suggestion(name, BY_ENV.keySet())
                  + " (environment variable; keys are "
                  + ENV_PREFIX
                  + "<SECTION>_<KEY>, e.g. "
                  + KEYS.get(0).envName()
                  + ")");
          continue;
        }
        applyString(key, entry.getValue(), origin);
      }
      String logLevel = env.get(ENV_LOG_LEVEL);
      if (logLevel != null && !logLevel.isBlank()) {
        applyString(BY_PATH.get("logging.level"), logLevel, "from " + ENV_LOG_LEVEL);
      }
    }

    void applySetting(Setting setting) {
      String origin = "from " + setting.source();
      Key key = BY_PATH.get(setting.key());
      if (key == null) {
        problems.add(
            "unknown key " + setting.key() + suggestion(setting.key(), BY_PATH.keySet()) + " (" + origin + ")");
        return;
      }
      applyString(key, setting.value(), origin);
    }

    private void applyString(Key key, String text, String origin) {
      try {
        set(key, fromString(key, text), origin);
      } catch (IllegalArgumentException e) {
        unparsed.add(key.path());
        problems.add(key.path() + ": " + e.getMessage() + " (" + origin + ")");
      }
    }

    private void set(Key key, Object value, String origin) {
      unparsed.remove(key.path());
      values.put(key.path(), value);
      origins.put(key.path(), origin);
    }

    Config finish() throws ConfigException {
      validate();
      if (!problems.isEmpty()) {
        throw new ConfigException(problems);
      }
      return build();
    }

    private Config build() {
      return new Config(
          new Config.Grpc(
              integer("grpc.port"),
              integer("grpc.max_inbound_message_bytes"),
              string("grpc.listen").trim(),
              new Config.Tls(
                  string("grpc.tls.cert_file").trim(),
                  string("grpc.tls.key_file").trim(),
                  string("grpc.tls.client_ca_file").trim(),
                  duration("grpc.tls.reload_interval")),
              duration("grpc.keepalive_time"),
              duration("grpc.keepalive_timeout"),
              duration("grpc.permit_keepalive_time"),
              integer("grpc.max_concurrent_streams"),
              duration("grpc.max_connection_idle")),
          new Config.Admin(integer("admin.port")),
          new Config.Classification(
              list("classification.context_clusters"),
              list("classification.generation_clusters"),
              list("classification.paths"),
              (Boolean) values.get("classification.strip_accept_encoding"),
              (Boolean) values.get("classification.trust_id_header")),
          new Config.Ordering(
              duration("ordering.context_wait"), (Config.Fallback) values.get("ordering.fallback")),
          new Config.Store(
              (Config.StoreType) values.get("store.type"),
              duration("store.ttl"),
              (String) values.get("store.redis_uri"),
              ((Number) values.get("store.max_entries")).longValue(),
              (String) values.get("store.key_prefix"),
              duration("store.redis_timeout"),
              (Boolean) values.get("store.redis_cluster")),
          new Config.Metadata((String) values.get("metadata.namespace")),
          new Config.Limits(
              integer("limits.max_body_bytes"),
              integer("limits.max_event_bytes"),
              integer("limits.max_usage_bytes"),
              integer("limits.max_key_bytes")),
          new Config.Metrics(list("metrics.models"), integer("metrics.max_models")),
          new Config.Logging(
              (Config.LogFormat) values.get("logging.format"), (Config.LogLevel) values.get("logging.level")),
          new Config.Shutdown(duration("shutdown.drain_timeout")),
          new Config.Waiting(integer("limits.max_waiters")),
          new Config.Streaming((Boolean) values.get("streaming.inject_include_usage")));
    }

    private void validate() {
      for (String port : List.of("grpc.port", "admin.port")) {
        int value = integer(port);
        if (value < 0 || value > 65535) {
          problem(port, "must be between 0 and 65535 (0 picks a free port), got " + value);
        }
      }
      int grpcPort = integer("grpc.port");
      if (grpcPort != 0 && grpcPort == integer("admin.port")) {
        problem("admin.port", "must differ from grpc.port (both are " + grpcPort + ")");
      }
      for (String size :
          List.of(
              "grpc.max_inbound_message_bytes",
              "limits.max_body_bytes",
              "limits.max_event_bytes",
              "limits.max_usage_bytes",
              "limits.max_key_bytes")) {
        if (integer(size) <= 0) {
          problem(size, "must be positive, got " + integer(size));
        }
      }
      int maxModels = integer("metrics.max_models");
      if (maxModels < 0 || maxModels > 1000) {
        problem("metrics.max_models", "must be between 0 and 1000, got " + maxModels);
      }
      int maxWaiters = integer("limits.max_waiters");
      if (maxWaiters < 0) {
        problem("limits.max_waiters", "must be 0 or more, got " + maxWaiters);
      }
      long maxEntries = ((Number) values.get("store.max_entries")).longValue();
      if (maxEntries <= 0) {
        problem("store.max_entries", "must be positive, got " + maxEntries);
      }
      Duration wait = duration("ordering.context_wait");
      if (wait.isNegative() || wait.isZero()) {
        problem("ordering.context_wait", "must be positive, got " + formatDuration(wait));
      } else if (wait.compareTo(MAX_CONTEXT_WAIT) > 0) {
        problem("ordering.context_wait", "must be at most 1h, got " + formatDuration(wait));
      }
      Duration ttl = duration("store.ttl");
      if (ttl.compareTo(wait) <= 0 && !unparsed.contains("ordering.context_wait")) {
        problem(
            "store.ttl",
            "must be longer than ordering.context_wait ("
                + formatDuration(wait)
                + "), got "
                + formatDuration(ttl));
      }
      String namespace = (String) values.get("metadata.namespace");
      if (namespace.isEmpty()) {
        problem("metadata.namespace", "must not be empty");
      } else if (!NAMESPACE.matcher(namespace).matches()) {
        problem("metadata.namespace", "\"" + namespace + "\" must match [A-Za-z0-9_.-]+");
      }
      for (String path : list("classification.paths")) {
        if (!path.startsWith("/")) {
          problem("classification.paths", "\"" + path + "\" must start with /");
        } else if (path.contains("?") || path.chars().anyMatch(Character::isWhitespace)) {
          problem("classification.paths", "\"" + path + "\" must be a plain path, without query or spaces");
        }
      }
      List<String> contextClusters = list("classification.context_clusters");
      List<String> generationClusters = list("classification.generation_clusters");
      for (String list : List.of("classification.context_clusters", "classification.generation_clusters")) {
        if (list(list).stream().anyMatch(String::isBlank)) {
          problem(list, "cluster names must not be blank");
        }
      }
      for (String cluster : generationClusters) {
        if (contextClusters.contains(cluster)) {
          problem(
              "classification.generation_clusters",
              "\"" + cluster + "\" is also listed in classification.context_clusters");
        }
      }
      if (values.get("store.type") == Config.StoreType.REDIS) {
        String problem = redisUriProblem((String) values.get("store.redis_uri"));
        if (problem != null) {
          problem("store.redis_uri", problem);
        } else if ((Boolean) values.get("store.redis_cluster")
            && ((String) values.get("store.redis_uri")).trim().toLowerCase(Locale.ROOT).contains("-sentinel:")) {
          problem("store.redis_cluster", "cannot be combined with a Sentinel store.redis_uri");
        }
      }
      String keyPrefix = (String) values.get("store.key_prefix");
      if (!KEY_PREFIX.matcher(keyPrefix).matches()) {
        problem(
            "store.key_prefix",
            "\"" + keyPrefix + "\" must be 1 to 64 characters of [A-Za-z0-9_.:-] (no braces: docs/redis.md)");
      }
      Duration redisTimeout = duration("store.redis_timeout");
      if (redisTimeout.compareTo(Duration.ofMillis(1)) < 0 || redisTimeout.compareTo(MAX_REDIS_TIMEOUT) > 0) {
        problem(
            "store.redis_timeout",
            "must be between 1ms and " + formatDuration(MAX_REDIS_TIMEOUT) + ", got " + formatDuration(redisTimeout));
      }
      validateTransport();
    }

    /** {@code grpc.listen}, {@code grpc.tls.*}, the connection durations and {@code shutdown.*}. */
    private void validateTransport() {
      String listen = string("grpc.listen");
      try {
        ListenAddress address = ListenAddress.parse(listen);
        if (address.isUnix()) {
          Path parent = address.socketPath().getParent();
          if (!Files.isDirectory(parent)) {
            problem(
                "grpc.listen",
                "the socket's directory "
                    + parent
                    + " does not exist (it is not created; mount or create it, e.g. a volume shared with"
                    + " Envoy)");
          } else if (Files.isDirectory(address.socketPath())) {
            problem("grpc.listen", address.socketPath() + " is a directory, not a socket path");
          }
        }
      } catch (IllegalArgumentException e) {
        problem("grpc.listen", e.getMessage());
      }

      for (String key :
          List.of(
              "grpc.keepalive_time",
              "grpc.permit_keepalive_time",
              "grpc.max_connection_idle")) {
        Duration d = duration(key);
        if (d.isNegative()) {
          problem(key, "must not be negative (0 turns it off), got " + formatDuration(d));
        } else if (d.compareTo(MAX_CONNECTION_DURATION) > 0) {
          problem(key, "must be at most 24h, got " + formatDuration(d));
        }
      }
      Duration keepaliveTimeout = duration("grpc.keepalive_timeout");
      if (keepaliveTimeout.isNegative() || keepaliveTimeout.isZero()) {
        problem("grpc.keepalive_timeout", "must be positive, got " + formatDuration(keepaliveTimeout));
      } else if (keepaliveTimeout.compareTo(MAX_CONNECTION_DURATION) > 0) {
        problem("grpc.keepalive_timeout", "must be at most 24h, got " + formatDuration(keepaliveTimeout));
      }
      int maxStreams = integer("grpc.max_concurrent_streams");
      if (maxStreams < 0) {
        problem("grpc.max_concurrent_streams", "must not be negative (0 means no limit), got " + maxStreams);
      }

      Duration drain = duration("shutdown.drain_timeout");
      if (drain.isNegative()) {
        problem("shutdown.drain_timeout", "must not be negative, got " + formatDuration(drain));
      } else if (drain.compareTo(MAX_DRAIN_TIMEOUT) > 0) {
        problem("shutdown.drain_timeout", "must be at most 1h, got " + formatDuration(drain));
      }

      Duration reload = duration("grpc.tls.reload_interval");
      if (reload.compareTo(MIN_TLS_RELOAD_INTERVAL) < 0) {
        problem("grpc.tls.reload_interval", "must be at least 100ms, got " + formatDuration(reload));
      } else if (reload.compareTo(MAX_CONNECTION_DURATION) > 0) {
        problem("grpc.tls.reload_interval", "must be at most 24h, got " + formatDuration(reload));
      }
      boolean cert = !string("grpc.tls.cert_file").isBlank();
      boolean key = !string("grpc.tls.key_file").isBlank();
      boolean clientCa = !string("grpc.tls.client_ca_file").isBlank();
      // A key with a pairing problem is not also checked on disk: one message per key.
      String unpaired = null;
      if (cert && !key) {
        unpaired = "grpc.tls.cert_file";
        problem(unpaired, "is set but grpc.tls.key_file is not (set both or neither)");
      } else if (key && !cert) {
        unpaired = "grpc.tls.key_file";
        problem(unpaired, "is set but grpc.tls.cert_file is not (set both or neither)");
      } else if (clientCa && !cert) {
        unpaired = "grpc.tls.client_ca_file";
        problem(
            unpaired,
            "requires grpc.tls.cert_file and grpc.tls.key_file (client certificates are checked only"
                + " over TLS)");
      }
      for (String file : List.of("grpc.tls.cert_file", "grpc.tls.key_file", "grpc.tls.client_ca_file")) {
        String name = string(file).trim();
        if (!name.isEmpty() && !file.equals(unpaired)) {
          String problem = readableFileProblem(name);
          if (problem != null) {
            problem(file, problem);
          }
        }
      }
    }

    private void problem(String key, String text) {
      if (unparsed.contains(key)) {
        return;
      }
      String origin = origins.get(key);
      problems.add(key + ": " + text + (origin == null ? "" : " (" + origin + ")"));
    }

    private int integer(String key) {
      return ((Number) values.get(key)).intValue();
    }

    private Duration duration(String key) {
      return (Duration) values.get(key);
    }

    private String string(String key) {
      return (String) values.get(key);
    }

    @SuppressWarnings("unchecked")
    private List<String> list(String key) {
      return (List<String>) values.get(key);
    }
  }

  /** Why {@code name} is not a readable regular file, or null when it is. */
  private static String readableFileProblem(String name) {
    Path path;
    try {
      path = Path.of(name);
    } catch (InvalidPathException e) {
      return "invalid path \"" + name + "\": " + e.getReason();
    }
    if (!Files.exists(path)) {
      return "file " + path + " does not exist";
    }
    if (!Files.isRegularFile(path)) {
      return path + " is not a regular file";
    }
    if (!Files.isReadable(path)) {
      return "file " + path + " is not readable by this process";
    }
    return null;
  }

  private static String redisUriProblem(String text) {
    URI uri;
    try {
      uri = new URI(text.trim());
    } catch (URISyntaxException e) {
      return "invalid URI \"" + text + "\": " + e.getReason();
    }
    if (uri.getScheme() == null || !REDIS_SCHEMES.contains(uri.getScheme().toLowerCase(Locale.ROOT))) {
      return "\"" + text + "\" must be a redis://, rediss://, redis-sentinel:// or rediss-sentinel:// URI";
    }
    if (uri.getHost() == null || uri.getHost().isEmpty()) {
      return "\"" + text + "\" has no host (expected e.g. redis://redis.example:6379)";
    }
    return null;
  }

  private static Object fromNode(Key key, JsonNode node) {
    switch (key.kind()) {
      case LIST -> {
        if (node.isNull()) {
          return List.of();
        }
        if (!node.isArray()) {
          throw new IllegalArgumentException("expected a list of strings, got " + describe(node));
        }
        List<String> items = new ArrayList<>();
        for (int i = 0; i < node.size(); i++) {
          JsonNode item = node.get(i);
          if (!item.isValueNode() || item.isNull()) {
            throw new IllegalArgumentException(
                "expected a list of strings, item " + (i + 1) + " is " + describe(item));
          }
          items.add(item.asText());
        }
        return List.copyOf(items);
      }
      case BOOL -> {
        if (node.isBoolean()) {
          return node.booleanValue();
        }
      }
      case INT, COUNT, SIZE -> {
        if (node.isIntegralNumber()) {
          if (!node.canConvertToLong()) {
            throw new IllegalArgumentException(node + " is out of range");
          }
          return narrow(key, node.longValue(), node.toString());
        }
      }
      case DURATION -> {
        if (node.isNumber()) {
          throw new IllegalArgumentException(
              "invalid duration " + node + " (a unit is required); " + DURATION_HINT);
        }
      }
      case STRING -> {
        if (node.isValueNode() && !node.isNull()) {
          return node.asText();
        }
      }
      case ENUM -> {
        // Textual values are handled below. YAML 1.1 reads an unquoted `off` as false.
        if (node.isBoolean() && !node.booleanValue()) {
          for (Enum<?> constant : key.enumType().getEnumConstants()) {
            if (constant.name().equals("OFF")) {
              return constant;
            }
          }
        }
      }
    }
    if (node.isTextual()) {
      return fromString(key, node.textValue());
    }
    throw new IllegalArgumentException("expected " + expected(key) + ", got " + describe(node));
  }

  private static Object fromString(Key key, String text) {
    String s = text.trim();
    return switch (key.kind()) {
      case INT, COUNT -> {
        long value;
        try {
          value = Long.parseLong(s);
        } catch (NumberFormatException e) {
          throw new IllegalArgumentException("invalid integer \"" + text + "\"");
        }
        yield narrow(key, value, s);
      }
      case SIZE -> narrow(key, parseSize(s), s);
      case DURATION -> parseDuration(text);
      case BOOL -> {
        if (s.equalsIgnoreCase("true")) {
          yield true;
        }
        if (s.equalsIgnoreCase("false")) {
          yield false;
        }
        throw new IllegalArgumentException("invalid boolean \"" + text + "\"; expected true or false");
      }
      case STRING -> text;
      case LIST ->
          Arrays.stream(text.split(",")).map(String::trim).filter(item -> !item.isEmpty()).toList();
      case ENUM -> {
        for (Enum<?> constant : key.enumType().getEnumConstants()) {
          if (constant.name().equalsIgnoreCase(s)) {
            yield constant;
          }
        }
        throw new IllegalArgumentException("invalid value \"" + text + "\"; expected " + expected(key));
      }
    };
  }

  private static Object narrow(Key key, long value, String text) {
    if (key.kind() == Kind.COUNT) {
      return value;
    }
    if (value < Integer.MIN_VALUE || value > Integer.MAX_VALUE) {
      throw new IllegalArgumentException(
          text + " is out of range (at most " + Integer.MAX_VALUE + ")");
    }
    return (int) value;
  }

  private static String expected(Key key) {
    if (key.kind() == Kind.ENUM) {
      return "one of: "
          + Arrays.stream(key.enumType().getEnumConstants())
              .map(c -> c.name().toLowerCase(Locale.ROOT))
              .collect(Collectors.joining(", "));
    }
    return key.kind().expected;
  }

  private static String describe(JsonNode node) {
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
