package io.disaggusage.extproc;

import io.disaggusage.extproc.cli.CommandEnvironment;
import io.disaggusage.extproc.cli.ConfigOptions;
import io.disaggusage.extproc.cli.DemoCommand;
import io.disaggusage.extproc.cli.ReplayCommand;
import io.disaggusage.extproc.cli.SandboxCommand;
import io.disaggusage.extproc.cli.WorkersCommand;
import io.disaggusage.extproc.cli.ShutdownHook;
import io.disaggusage.extproc.cli.StartupFailure;
import io.disaggusage.extproc.cli.Signals;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.config.ConfigException;
import io.disaggusage.extproc.config.ConfigLoader;
import io.disaggusage.extproc.logging.Logging;
import io.disaggusage.extproc.runtime.ServerRuntime;
import io.disaggusage.extproc.runtime.StartupException;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.IVersionProvider;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * Command line entry point. With no subcommand it runs the server until SIGTERM/SIGINT.
 *
 * <p>A subcommand is one class: annotate it with {@code @Command(name = "...")}, give it {@code @Mixin
 * ConfigOptions} if it loads the configuration and {@code @ParentCommand CommandEnvironment} to reach {@link #env()},
 * and add it to {@link #SUBCOMMANDS}. They are registered only when the arguments name one or ask for help:
 * picocli loads every registered command's classes, and serving must not load the emulator's.
 */
@Command(
    name = "disagg-usage-extproc",
    mixinStandardHelpOptions = true,
    versionProvider = Main.VersionProvider.class,
    sortOptions = false,
    usageHelpAutoWidth = true,
    description = {
      "Envoy ext_proc service that corrects OpenAI token usage in prefill/decode disaggregated serving.",
      "Without a subcommand, runs the server until SIGTERM or SIGINT."
    },
    exitCodeListHeading = "%nExit codes:%n",
    exitCodeList = {
      "0:clean shutdown (or --help, --version, --print-config)",
      "1:start-up failure (a port in use, an unreadable TLS file, a Redis URI the client rejects); an"
          + " unreachable Redis is not one: the server starts and passes traffic through until it connects",
      "2:invalid configuration or command line"
    })
public final class Main implements Callable<Integer>, CommandEnvironment {
  private static final Logger log = LoggerFactory.getLogger(Main.class);

  /** Exit status for an invalid configuration or command line. */
  public static final int EXIT_CONFIG = CommandEnvironment.EXIT_CONFIG;

  /** The subcommands, by name: the emulator and the replay tools behind them are loaded only for them. */
  static final Map<String, Class<?>> SUBCOMMANDS =
      Map.of(
          "demo", DemoCommand.class,
          "replay", ReplayCommand.class,
          "sandbox", SandboxCommand.class,
          "workers", WorkersCommand.class);

  /** Exit status when the server cannot start. */
  public static final int EXIT_STARTUP = CommandLine.ExitCode.SOFTWARE;

  @Mixin ConfigOptions options;

  @Option(
      names = "--print-config",
      description =
          "Prints the effective configuration (defaults, file, environment and flags merged and validated)"
              + " as YAML usable as --config, and exits without starting the server.")
  boolean printConfig;

  @Option(
      names = "--exit-when-ready",
      description =
          "Starts the server (warm-up included), and shuts it down cleanly as soon as it is ready. The"
              + " build runs it once to record the class-data archive (-XX:ArchiveClassesAtExit); also a"
              + " start-up check.")
  boolean exitWhenReady;

  @Option(
      names = "--on-startup-failure",
      paramLabel = "exit|idle",
      description =
          "When the configuration is invalid or the server cannot start: exit (the default) with status 2 or 1,"
              + " or idle: print the same message, serve nothing and exit with that status at SIGTERM or SIGINT. For a container in a"
              + " pod that carries LLM traffic: Envoy then passes traffic through, where a crash-looping container"
              + " would make the pod unready (env: DISAGG_USAGE_ON_STARTUP_FAILURE).")
  String onStartupFailure;

  @Spec CommandSpec spec;

  private final Map<String, String> env;
  private final Consumer<ServerRuntime> onStarted;

  public Main(Map<String, String> env) {
    this(env, runtime -> {});
  }

  /** {@code onStarted} sees the running server before {@link #call()} waits for its shutdown. */
  Main(Map<String, String> env, Consumer<ServerRuntime> onStarted) {
    this.env = Map.copyOf(env);
    this.onStarted = onStarted;
  }

  /**
   * Netty declares JFR events for its pooled allocator, and loading the first one has the JDK
   * instrument it: about 0.25 s of CPU at start-up (docs/performance.md). Off unless set otherwise.
   */
  static final String NETTY_JFR_PROPERTY = "io.grpc.netty.shaded.io.netty.jfr.enabled";

  /**
   * Netty samples one buffer allocation in 128 for leak tracking and records a stack trace for each:
   * 2-3 % of the service's CPU through a real Envoy (docs/performance.md), for a diagnostic no operator
   * reads. Off unless set otherwise ({@code -Dio.grpc.netty.shaded.io.netty.leakDetection.level=simple}).
   */
  static final String NETTY_LEAK_DETECTION_PROPERTY = "io.grpc.netty.shaded.io.netty.leakDetection.level";

  public static void main(String[] args) {
    defaultProperty(NETTY_JFR_PROPERTY, "false");
    defaultProperty(NETTY_LEAK_DETECTION_PROPERTY, "disabled");
    CommandLine commandLine = commandLine(new Main(System.getenv()), namesASubcommandOrHelp(args));
    // Output in UTF-8 whatever the platform's default charset is: replay prints response bodies as sent.
    commandLine.setOut(new PrintWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), true));
    commandLine.setErr(new PrintWriter(new OutputStreamWriter(System.err, StandardCharsets.UTF_8), true));
    System.exit(commandLine.execute(args));
  }

  private static void defaultProperty(String name, String value) {
    if (System.getProperty(name) == null) {
      System.setProperty(name, value);
    }
  }

  /**
   * The picocli command line for {@code main}: usage footer listing every configuration key, and
   * configuration/start-up errors printed as one message (no stack trace) with exit status 2/1.
   */
  public static CommandLine commandLine(Main main) {
    return commandLine(main, true);
  }

  /**
   * Whether {@code args} may need the subcommands: one of their names, or a request for help (which
   * lists them). Otherwise the server runs, and registering them would only load their classes.
   */
  static boolean namesASubcommandOrHelp(String[] args) {
    for (String arg : args) {
      if (SUBCOMMANDS.containsKey(arg) || arg.equals("help") || arg.equals("-h") || arg.equals("--help")) {
        return true;
      }
    }
    return false;
  }

  private static CommandLine commandLine(Main main, boolean withSubcommands) {
    CommandLine commandLine = new CommandLine(main);
    if (withSubcommands) {
      // Sorted, so --help lists them in a stable order.
      new TreeMap<>(SUBCOMMANDS).forEach(commandLine::addSubcommand);
      // Only help shows it; describing every key's default costs a cold start tens of milliseconds.
      commandLine.getCommandSpec().usageMessage().footer(keysFooter());
    }
    commandLine.setParameterExceptionHandler(
        (exception, args) -> {
          CommandLine cl = exception.getCommandLine();
          cl.getErr().println(exception.getMessage());
          cl.getErr().println("Run with --help for usage.");
          return EXIT_CONFIG;
        });
    commandLine.setExecutionExceptionHandler(
        (exception, cl, parseResult) -> {
          if (exception instanceof ConfigException) {
            cl.getErr().println(exception.getMessage());
            return EXIT_CONFIG;
          }
          if (exception instanceof StartupException) {
            cl.getErr().println("startup error: " + exception.getMessage());
            return EXIT_STARTUP;
          }
          log.error("unexpected failure", exception);
          cl.getErr().println("error: " + exception);
          return EXIT_STARTUP;
        });
    return commandLine;
  }

  /** The environment this command reads ({@code DISAGG_USAGE_*}); for subcommands. */
  @Override
  public Map<String, String> env() {
    return env;
  }

  /** Runs the server until it is shut down, or prints the configuration with {@code --print-config}. */
  @Override
  public Integer call() throws ConfigException, InterruptedException {
    StartupFailure onFailure = printConfig ? StartupFailure.EXIT : StartupFailure.of(onStartupFailure, env);
    PrintWriter err = spec.commandLine().getErr();
    Config config;
    try {
      config = options.load(env);
    } catch (ConfigException e) {
      return onFailure.fail(e.getMessage(), EXIT_CONFIG, err);
    }
    if (printConfig) {
      spec.commandLine().getOut().print(printedConfig(config));
      spec.commandLine().getOut().flush();
      return CommandLine.ExitCode.OK;
    }
    Logging.configure(config.logging());
    ServerRuntime runtime;
    try {
      runtime = ServerRuntime.start(config);
    } catch (StartupException e) {
      return onFailure.fail("startup error: " + e.getMessage(), EXIT_STARTUP, err);
    } catch (RuntimeException e) {
      log.error("unexpected failure", e);
      return onFailure.fail("error: " + e, EXIT_STARTUP, err);
    }
    ShutdownHook hook = ShutdownHook.install(runtime::close, "disagg-usage-shutdown-hook");
    Signals signals =
        Signals.onTermination(
            signal -> {
              log.info("received SIG{}, shutting down", signal);
              new Thread(runtime::close, "disagg-usage-shutdown").start();
            });
    try {
      onStarted.accept(runtime);
      if (exitWhenReady) {
        log.info("ready; shutting down (--exit-when-ready)");
        return CommandLine.ExitCode.OK;
      }
      runtime.awaitTermination();
    } finally {
      runtime.close();
      signals.close();
      hook.remove();
    }
    return CommandLine.ExitCode.OK;
  }

  /** What {@code --print-config} prints: a comment line, then {@link ConfigLoader#toPrintableYaml}. */
  static String printedConfig(Config config) {
    return "# disagg-usage-extproc "
        + Version.current()
        + " effective configuration (defaults < --config file < environment < flags; secrets shown as ***)\n"
        + ConfigLoader.toPrintableYaml(config);
  }

  private static String keysFooter() {
    StringBuilder footer =
        new StringBuilder(
            "%nConfiguration keys and their defaults. Precedence: flags and --set, then environment"
                + " variables, then the --config file, then defaults. The environment variable for a key is "
                + ConfigLoader.ENV_PREFIX
                + " followed by the key in upper case with . as _, e.g. "
                + ConfigLoader.envName("ordering.context_wait")
                + "; lists are comma-separated there. Durations: 250ms, 2s, 1m, 1h, PT2S. Sizes: bytes or"
                + " a KiB/MiB suffix.%n");
    int width = ConfigLoader.keys().stream().mapToInt(String::length).max().orElse(0);
    for (ConfigLoader.KeyInfo key : ConfigLoader.describeKeys()) {
      footer.append(
          String.format("  %-" + width + "s  %s%%n", key.key(), key.defaultValue().replace("%", "%%")));
    }
    return footer.toString();
  }

  /** {@code --version}: the build version and the Java runtime. */
  static final class VersionProvider implements IVersionProvider {
    @Override
    public String[] getVersion() {
      return new String[] {
        "disagg-usage-extproc " + Version.current(),
        "Java " + Runtime.version() + " (" + System.getProperty("java.vm.name") + ")"
      };
    }
  }
}
