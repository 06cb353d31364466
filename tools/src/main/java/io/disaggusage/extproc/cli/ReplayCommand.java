package io.disaggusage.extproc.cli;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.config.ConfigException;
import io.disaggusage.extproc.tools.LocalService;
import io.disaggusage.extproc.emulator.engines.ScheduleOrder;
import io.disaggusage.extproc.emulator.envoy.EnvoyProfile;
import io.disaggusage.extproc.emulator.envoy.FakeEnvoy;
import io.disaggusage.extproc.driver.FilterConfigs;
import io.disaggusage.extproc.tools.replay.InputFiles;
import io.disaggusage.extproc.tools.replay.Replay;
import io.disaggusage.extproc.tools.replay.ReplayInput;
import io.disaggusage.extproc.tools.replay.ReplayInputException;
import io.disaggusage.extproc.tools.replay.ReplayReport;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.ArgGroup;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/**
 * {@code replay}: captured orchestrator-to-worker exchanges through the service, exactly as Envoy would
 * send them, to check a configuration against an engine's real traffic before deploying. Prints the
 * generation response as the client would get it, the dynamic metadata and a one-line outcome.
 */
@Command(
    name = "replay",
    mixinStandardHelpOptions = true,
    sortOptions = false,
    usageHelpAutoWidth = true,
    description = {
      "Replays a captured context exchange and generation exchange through the fake Envoy to the service (a"
          + " running one with --target, else one in this process with --config), and prints the generation"
          + " response as the client gets it, the dynamic metadata and the outcome.",
      "Input: a body file per request and response, each with an optional headers file (\"name: value\" lines,"
          + " :method/:path/:status pseudo-headers, or an HTTP/1 start line as curl -D writes), or --har."
          + " The context files may be left out to replay a generation exchange alone."
    },
    exitCodeListHeading = "%nExit codes:%n",
    exitCodeList = {
      "0:the generation exchange ended with the expected outcome (--expect, default rewritten)",
      "1:an exchange failed (Envoy local reply, reset, message timeout, fail-open) or the target is unreachable",
      "2:invalid command line, configuration or input file",
      "3:the exchanges went through, but with another outcome than expected"
    })
public final class ReplayCommand implements Callable<Integer> {
  /** Exit status when the exchanges went through with another outcome than {@code --expect}. */
  public static final int EXIT_UNEXPECTED_OUTCOME = 3;

  @ParentCommand CommandEnvironment main;

  @ArgGroup(exclusive = true, multiplicity = "1")
  ReplayFiles files;

  @Option(names = "--context-cluster", paramLabel = "NAME", description = "xds.cluster_name of the context leg.")
  String contextCluster;

  @Option(names = "--generation-cluster", paramLabel = "NAME", description = "xds.cluster_name of the generation leg.")
  String generationCluster;

  @Option(
      names = "--generation-first",
      description =
          "Replays the whole generation response before the context response (TensorRT-LLM generation_first,"
              + " SGLang). Default: context-first.")
  boolean generationFirst;

  @Option(
      names = "--chunk-size",
      paramLabel = "BYTES",
      description =
          "Response bodies reach Envoy in chunks of this size. Default: one chunk per event of an event"
              + " stream, the whole body otherwise.")
  int chunkSize;

  @Option(
      names = "--chunk-delay",
      paramLabel = "DURATION",
      defaultValue = "0ms",
      converter = DurationConverter.class,
      description = "Pause before each response chunk, like a streaming engine (e.g. 20ms). Default: none.")
  Duration chunkDelay;

  @Mixin TargetOptions target;

  @Option(
      names = "--envoy-config",
      paramLabel = "FILE",
      description =
          "YAML/JSON with the ext_proc filter settings Envoy runs with: a bootstrap, an http_filters entry or"
              + " the filter's typed_config. Default: the shipped deploy/envoy/envoy.yaml settings.")
  Path envoyConfig;

  @Option(
      names = "--message-timeout",
      paramLabel = "DURATION",
      converter = DurationConverter.class,
      description = "Overrides the filter's message_timeout (e.g. on a very busy machine).")
  Duration messageTimeout;

  @Option(
      names = "--expect",
      paramLabel = "OUTCOME",
      defaultValue = "rewritten",
      description = "The outcome that counts as success (default: ${DEFAULT-VALUE}), e.g. passthrough_no_context.")
  String expect;

  @Option(
      names = "--body-out",
      paramLabel = "FILE",
      description = "Also writes the generation response body the client gets to FILE, byte for byte.")
  Path bodyOut;

  @Mixin ConfigOptions options;

  @Spec CommandSpec spec;

  @Override
  public Integer call() throws ConfigException, IOException {
    if (chunkSize < 0) {
      throw new ParameterException(spec.commandLine(), "--chunk-size must be positive");
    }
    options.rejectFlagsNotReadInProcess(spec);
    Config config = options.load(main.env());
    ConsoleLogging.toStandardError(config.logging());
    PrintWriter err = spec.commandLine().getErr();
    ReplayInput input;
    ExternalProcessor filter;
    try {
      input = files.read(contextCluster, generationCluster);
      filter =
          envoyConfig == null
              ? FilterConfigs.shipped(config.metadata().namespace())
              : InputFiles.envoyConfig(envoyConfig);
    } catch (ReplayInputException | IllegalArgumentException e) {
      err.println("replay: " + e.getMessage());
      return CommandEnvironment.EXIT_CONFIG;
    }
    if (messageTimeout != null) {
      filter = FilterConfigs.withMessageTimeout(filter, messageTimeout);
    }
    Replay.Options replayOptions =
        new Replay.Options(
            generationFirst ? ScheduleOrder.GENERATION_FIRST : ScheduleOrder.CONTEXT_FIRST, chunkSize, chunkDelay);
    Replay.Result result;
    if (target.remote()) {
      try (TargetOptions.Connection connection = target.connect()) {
        if (!connection.ready()) {
          err.println("replay: cannot connect to " + target.describe());
          return CommandLine.ExitCode.SOFTWARE;
        }
        result = replay(connection.channel(), filter, input, replayOptions);
      } catch (ReplayInputException e) {
        err.println("replay: " + e.getMessage());
        return CommandEnvironment.EXIT_CONFIG;
      }
    } else {
      try (LocalService service = LocalService.start(config)) {
        result = replay(service.channel(), filter, input, replayOptions);
      }
    }
    ReplayReport report = new ReplayReport(result, config.metadata().namespace(), input.generation().responseBody());
    print(report);
    if (bodyOut != null) {
      try {
        Files.write(bodyOut, report.clientBody());
      } catch (IOException e) {
        err.println("replay: --body-out " + bodyOut + ": cannot write: " + e.getMessage());
        return CommandLine.ExitCode.SOFTWARE;
      }
    }
    if (!result.problems().isEmpty()) {
      return CommandLine.ExitCode.SOFTWARE;
    }
    return report.outcome().equals(expect) ? CommandLine.ExitCode.OK : EXIT_UNEXPECTED_OUTCOME;
  }

  private static Replay.Result replay(
      io.grpc.Channel channel, ExternalProcessor filter, ReplayInput input, Replay.Options options) {
    try (FakeEnvoy envoy = FakeEnvoy.builder(channel).config(filter).profile(EnvoyProfile.V1_37).build()) {
      return Replay.run(envoy, input, options);
    }
  }

  private void print(ReplayReport report) {
    PrintWriter out = spec.commandLine().getOut();
    byte[] body = report.clientBody();
    out.println("=== generation response body as the client gets it (" + body.length + " bytes) ===");
    String text = new String(body, StandardCharsets.UTF_8);
    if (!Arrays.equals(text.getBytes(StandardCharsets.UTF_8), body)) {
      out.println("(not valid UTF-8, shown with replacement characters; --body-out FILE writes the exact bytes)");
    }
    out.print(text);
    if (!text.endsWith("\n")) {
      out.println();
    }
    out.println("=== dynamic metadata ===");
    out.println(report.metadataJson());
    out.println("=== outcome ===");
    out.println(report.outcomeLine());
    out.flush();
  }
}
