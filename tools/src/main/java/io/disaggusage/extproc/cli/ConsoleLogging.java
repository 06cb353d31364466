package io.disaggusage.extproc.cli;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.logging.Logging;

/** Logging for the commands whose standard output is for the user: log lines go to standard error. */
final class ConsoleLogging {
  /** Text lines, warnings and errors only: what the demo, sandbox and workers commands log. */
  static final Config.Logging WARNINGS = new Config.Logging(Config.LogFormat.TEXT, Config.LogLevel.WARN);

  private ConsoleLogging() {}

  /** Configures logging as {@code settings} say, on standard error. */
  static void toStandardError(Config.Logging settings) {
    Logging.configure(settings);
    Logging.useStandardError(true);
  }
}
