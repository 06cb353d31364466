package io.disaggusage.extproc.cli;

import java.util.Map;

/**
 * What a subcommand reads from the top-level command: the environment ({@code DISAGG_USAGE_*}) it was
 * started with. Subcommands declare {@code @ParentCommand CommandEnvironment}, so they do not depend
 * on the class that lists them.
 */
public interface CommandEnvironment {
  /** Exit status of a configuration error (picocli's usage status). */
  int EXIT_CONFIG = picocli.CommandLine.ExitCode.USAGE;

  Map<String, String> env();
}
