package io.disaggusage.extproc.cli;

import io.disaggusage.extproc.Main;
import io.disaggusage.extproc.logging.Logging;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.Map;
import picocli.CommandLine;

/**
 * One in-process run of the command line with captured output, as {@code java -jar} would run it. The
 * commands switch the process's logging to warnings on stderr; {@link #restoreLogging()} puts it back
 * for the tests that follow in the same JVM.
 */
public record CommandRun(int exitCode, String out, String err) {

  public static CommandRun run(String... args) {
    return run(Map.of(), args);
  }

  public static CommandRun run(Map<String, String> env, String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    CommandLine commandLine = Main.commandLine(new Main(env));
    commandLine.setOut(new PrintWriter(out, true));
    commandLine.setErr(new PrintWriter(err, true));
    int exitCode = commandLine.execute(args);
    return new CommandRun(exitCode, out.toString(), err.toString());
  }

  public static void restoreLogging() {
    Logging.useStandardError(false);
    Logging.setRootLevel("INFO");
  }
}
