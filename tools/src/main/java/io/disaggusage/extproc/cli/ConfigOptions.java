package io.disaggusage.extproc.cli;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.config.ConfigException;
import io.disaggusage.extproc.config.ConfigLoader;
import io.disaggusage.extproc.config.ConfigLoader.Setting;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Predicate;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;

/**
 * The options every command that loads the configuration shares; a picocli mixin
 * ({@code @Mixin ConfigOptions options}). Precedence: flags, then environment, then the file, then
 * defaults.
 */
public final class ConfigOptions {

  @Option(
      names = {"-c", "--config"},
      paramLabel = "FILE",
      description = "YAML configuration file (env: " + ConfigLoader.ENV_CONFIG_FILE + ").")
  Path configFile;

  @Option(
      names = "--grpc-port",
      paramLabel = "PORT",
      description = "ext_proc + grpc.health.v1 port, 0 for any free port (grpc.port; env: DISAGG_USAGE_GRPC_PORT).")
  String grpcPort;

  @Option(
      names = "--admin-port",
      paramLabel = "PORT",
      description = "HTTP /healthz /readyz /metrics port, 0 for any free port (admin.port; env: DISAGG_USAGE_ADMIN_PORT).")
  String adminPort;

  @Option(
      names = "--log-level",
      paramLabel = "LEVEL",
      description =
          "Root log level: trace, debug, info, warn, error, off; wins over the logging.level key (env: "
              + ConfigLoader.ENV_LOG_LEVEL
              + ").")
  String logLevel;

  @Option(
      names = {"-s", "--set"},
      paramLabel = "KEY=VALUE",
      description = "Sets any configuration key, e.g. --set ordering.context_wait=500ms; repeatable.")
  Map<String, String> settings = new LinkedHashMap<>();

  /** The YAML file: {@code --config}, else {@value ConfigLoader#ENV_CONFIG_FILE}, else none. */
  public Optional<Path> configFile(Map<String, String> env) {
    if (configFile != null) {
      return Optional.of(configFile);
    }
    String fromEnv = env.get(ConfigLoader.ENV_CONFIG_FILE);
    return fromEnv == null || fromEnv.isBlank() ? Optional.empty() : Optional.of(Path.of(fromEnv.trim()));
  }

  /**
   * Rejects, as a usage error, the flags that set what {@code command}'s in-process service never reads
   * (its listener, admin port and store back-end: {@link #NOT_READ_IN_PROCESS}), instead of ignoring them
   * silently. The same keys in a {@code --config} file or the environment stay allowed: the production
   * configuration may be replayed as it is.
   */
  public void rejectFlagsNotReadInProcess(CommandSpec command) {
    String why = " does not apply to " + command.name() + ": its service runs in this process on a private loopback"
        + " port with its own memory store and no admin port";
    if (grpcPort != null) {
      throw new ParameterException(command.commandLine(), "--grpc-port" + why);
    }
    if (adminPort != null) {
      throw new ParameterException(command.commandLine(), "--admin-port" + why);
    }
    for (String key : settings.keySet()) {
      if (NOT_READ_IN_PROCESS.test(key.trim())) {
        throw new ParameterException(command.commandLine(), "--set " + key.trim() + why);
      }
    }
  }

  /** The keys an in-process service (demo, replay) never reads. */
  static final Predicate<String> NOT_READ_IN_PROCESS = key ->
      (key.startsWith("grpc.") && !key.equals("grpc.max_inbound_message_bytes"))
          || key.startsWith("admin.")
          || key.equals("store.type")
          || key.startsWith("store.redis")
          || key.equals("store.key_prefix")
          || key.startsWith("shutdown.");

  /** Loads and validates the configuration from defaults, file, {@code env} and these flags. */
  public Config load(Map<String, String> env) throws ConfigException {
    List<Setting> overrides = new ArrayList<>();
    settings.forEach((key, value) -> overrides.add(new Setting(key, value, "--set " + key)));
    if (grpcPort != null) {
      overrides.add(new Setting("grpc.port", grpcPort, "--grpc-port"));
    }
    if (adminPort != null) {
      overrides.add(new Setting("admin.port", adminPort, "--admin-port"));
    }
    if (logLevel != null) {
      overrides.add(new Setting("logging.level", logLevel, "--log-level"));
    }
    return ConfigLoader.load(configFile(env).orElse(null), env, overrides);
  }
}
