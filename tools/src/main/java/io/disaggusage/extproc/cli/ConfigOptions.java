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
import picocli.CommandLine.Option;

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
