package io.disaggusage.extproc.cli;

import io.disaggusage.extproc.tools.demo.DemoRow;
import io.disaggusage.extproc.tools.demo.DemoRun;
import io.disaggusage.extproc.tools.demo.DemoTable;
import java.io.IOException;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code demo}: what the service does, on a laptop, in a few seconds. Needs no configuration and no
 * network beyond loopback; the table goes to stdout, the (warning-level) logs to stderr.
 */
@Command(
    name = "demo",
    mixinStandardHelpOptions = true,
    sortOptions = false,
    usageHelpAutoWidth = true,
    description = {
      "Runs the service in this process behind a fake Envoy, with simulated TensorRT-LLM and vLLM prefill"
          + " and decode workers (real prefix caches, the decode-side cached_tokens bug), sends each scenario's"
          + " prompt twice, and prints what the client reads without and with the service."
    },
    exitCodeListHeading = "%nExit codes:%n",
    exitCodeList = {
      "0:every response reached the client with the context worker's true counts",
      "1:a response was not corrected (the table says which), or the demo could not run"
    })
public final class DemoCommand implements Callable<Integer> {

  @Option(
      names = "--message-timeout",
      paramLabel = "DURATION",
      defaultValue = "200ms",
      converter = DurationConverter.class,
      description =
          "The fake Envoy's ext_proc message_timeout (default: ${DEFAULT-VALUE}, as shipped). Raise it on a"
              + " machine so busy that the service cannot answer in time.")
  Duration messageTimeout;

  @Spec CommandSpec spec;

  @Override
  public Integer call() throws IOException {
    ConsoleLogging.toStandardError(ConsoleLogging.WARNINGS);
    long start = System.nanoTime();
    DemoRun.Report report = DemoRun.run(messageTimeout);
    PrintWriter out = spec.commandLine().getOut();
    out.print(DemoTable.render(report));
    out.printf(Locale.ROOT, "Finished in %.1f s.%n", (System.nanoTime() - start) / 1e9);
    out.flush();
    return report.rows().stream().allMatch(DemoRow::truthful) ? CommandLine.ExitCode.OK : CommandLine.ExitCode.SOFTWARE;
  }
}
