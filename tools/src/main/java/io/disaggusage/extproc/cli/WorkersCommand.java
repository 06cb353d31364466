package io.disaggusage.extproc.cli;

import io.disaggusage.extproc.runtime.StartupException;
import io.disaggusage.extproc.emulator.engines.UsageVariant;
import io.disaggusage.extproc.emulator.workers.EngineKind;
import io.disaggusage.extproc.emulator.workers.EngineWorker;
import io.disaggusage.extproc.emulator.workers.WorkerStartException;
import io.disaggusage.extproc.emulator.workers.WorkerRole;
import io.disaggusage.extproc.emulator.workers.WorkerSpec;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.function.Supplier;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code workers}: simulated prefill and decode workers of one engine, for a real router or Envoy in
 * front of them. Runs until Ctrl-C or SIGTERM; one line per worker goes to stdout.
 */
@Command(
    name = "workers",
    mixinStandardHelpOptions = true,
    sortOptions = false,
    usageHelpAutoWidth = true,
    description = {
      "Starts simulated TensorRT-LLM, vLLM or SGLang prefill and decode workers (docs/workers.md), prints one"
          + " line per worker (engine, role, URL) and runs until Ctrl-C."
    },
    exitCodeListHeading = "%nExit codes:%n",
    exitCodeList = {"0:stopped by Ctrl-C or SIGTERM", "1:could not start (an address in use)", "2:invalid command line"})
public final class WorkersCommand implements Callable<Integer> {

  @Option(names = "--engine", required = true, paramLabel = "ENGINE", description = "trtllm, vllm or sglang.")
  String engine;

  @Option(
      names = "--prefill",
      paramLabel = "HOST:PORT",
      description = "A prefill (TensorRT-LLM: context) worker's bind address; repeat for more.")
  List<String> prefill = new ArrayList<>();

  @Option(
      names = "--prefill-bootstrap-port",
      paramLabel = "PORT",
      description = "SGLang only, one per --prefill, in order: the port of that prefill's bootstrap listener (on its host).")
  List<Integer> bootstrapPorts = new ArrayList<>();

  @Option(
      names = "--decode",
      paramLabel = "HOST:PORT",
      description = "A decode (TensorRT-LLM: generation) worker's bind address; repeat for more.")
  List<String> decode = new ArrayList<>();

  @Option(
      names = "--usage",
      paramLabel = "VARIANT",
      defaultValue = "bug",
      description = "bug, whole-prompt-bug (vLLM only) or fixed (default: ${DEFAULT-VALUE}).")
  String usage;

  @Option(names = "--model", paramLabel = "MODEL", defaultValue = WorkerSpec.DEFAULT_MODEL, description = "The model id the workers report (default: ${DEFAULT-VALUE}).")
  String model;

  @Option(
      names = "--prefill-delay",
      paramLabel = "DURATION",
      converter = DurationConverter.class,
      defaultValue = "0s",
      description = "How long a prefill worker waits before it answers (default: ${DEFAULT-VALUE}).")
  Duration prefillDelay;

  @Option(
      names = "--token-delay",
      paramLabel = "DURATION",
      converter = DurationConverter.class,
      defaultValue = "0s",
      description = "A pause per output token (default: ${DEFAULT-VALUE}).")
  Duration tokenDelay;

  @Spec CommandSpec spec;

  @Override
  public Integer call() throws StartupException, InterruptedException {
    List<WorkerSpec> specs = specs();
    ConsoleLogging.toStandardError(ConsoleLogging.WARNINGS);
    List<EngineWorker> workers = new ArrayList<>();
    CountDownLatch stop = new CountDownLatch(1);
    ShutdownHook hook = null; // installed once every worker has started
    try (Signals signals = Signals.onTermination(signal -> stop.countDown())) {
      for (WorkerSpec s : specs) {
        try {
          workers.add(EngineWorker.start(s));
        } catch (WorkerStartException e) {
          throw new StartupException(e.getMessage(), e);
        }
      }
      hook = ShutdownHook.install(() -> workers.forEach(EngineWorker::close), "disagg-usage-workers-shutdown-hook");
      PrintWriter out = spec.commandLine().getOut();
      workers.forEach(w -> out.println(w.describe()));
      out.flush();
      stop.await();
    } finally {
      workers.forEach(EngineWorker::close);
      if (hook != null) {
        hook.remove();
      }
    }
    spec.commandLine().getOut().println("Stopped.");
    spec.commandLine().getOut().flush();
    return CommandLine.ExitCode.OK;
  }

  /** The workers the options ask for; a bad option fails naming it. */
  List<WorkerSpec> specs() {
    EngineKind kind = parse("--engine", () -> EngineKind.fromLabel(engine));
    UsageVariant variant = parse("--usage", () -> UsageVariant.fromLabel(usage));
    if (!kind.variants().contains(variant)) {
      throw invalid("--usage: " + kind.displayName() + " has no " + variant.label() + " variant");
    }
    if (prefill.isEmpty() && decode.isEmpty()) {
      throw invalid("give at least one --prefill or --decode");
    }
    boolean sglang = kind == EngineKind.SGLANG;
    if (sglang ? bootstrapPorts.size() != prefill.size() : !bootstrapPorts.isEmpty()) {
      throw invalid(
          sglang
              ? "--prefill-bootstrap-port: give one per --prefill (" + prefill.size() + "), got " + bootstrapPorts.size()
              : "--prefill-bootstrap-port: only SGLang prefill workers have a bootstrap listener");
    }
    List<WorkerSpec> specs = new ArrayList<>();
    for (int i = 0; i < prefill.size(); i++) {
      int bootstrap = sglang ? port("--prefill-bootstrap-port", bootstrapPorts.get(i)) : 0;
      specs.add(spec(kind, WorkerRole.PREFILL, "--prefill", prefill.get(i), variant).withBootstrapPort(bootstrap));
    }
    for (String address : decode) {
      specs.add(spec(kind, WorkerRole.DECODE, "--decode", address, variant));
    }
    return specs;
  }

  private WorkerSpec spec(EngineKind kind, WorkerRole role, String option, String address, UsageVariant variant) {
    int colon = address.lastIndexOf(':');
    if (colon <= 0 || colon == address.length() - 1) {
      throw invalid(option + ": \"" + address + "\": expected HOST:PORT");
    }
    String host = address.substring(0, colon);
    if (host.startsWith("[") && host.endsWith("]")) {
      host = host.substring(1, host.length() - 1);
    }
    int port = port(option, parse(option, () -> Integer.parseInt(address.substring(colon + 1))));
    return WorkerSpec.of(kind, role, host, port)
        .withVariant(variant)
        .withModel(model)
        .withPrefillDelay(prefillDelay)
        .withTokenDelay(tokenDelay);
  }

  private int port(String option, int port) {
    if (port < 0 || port > 65_535) {
      throw invalid(option + ": " + port + ": expected a port from 1 to 65535, or 0 for any free one");
    }
    return port;
  }

  private <T> T parse(String option, Supplier<T> parser) {
    try {
      return parser.get();
    } catch (IllegalArgumentException e) {
      throw invalid(option + ": " + e.getMessage());
    }
  }

  private CommandLine.ParameterException invalid(String message) {
    return new CommandLine.ParameterException(spec.commandLine(), message);
  }
}
