package io.disaggusage.extproc.config;

import java.util.List;
import java.util.stream.Collectors;

/**
 * The configuration could not be loaded or is invalid. The message has one line per problem, each of
 * the form {@code config error: <full.key>: <problem> (<where the value came from>)}, and is meant to
 * be shown to the operator as is.
 */
public final class ConfigException extends Exception {
  private static final long serialVersionUID = 1L;

  private final List<String> problems;

  public ConfigException(List<String> problems) {
    super(problems.stream().map(p -> "config error: " + p).collect(Collectors.joining("\n")));
    this.problems = List.copyOf(problems);
  }

  public ConfigException(String problem) {
    this(List.of(problem));
  }

  /** The individual problems, without the {@code config error: } prefix. */
  public List<String> problems() {
    return problems;
  }
}
