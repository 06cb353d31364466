package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;

/** Checks on what a policy checker reports about a deliberately broken copy of a shipped object. */
final class Problems {
  private Problems() {}

  /** Asserts that, for each of {@code named}, one of {@code problems} mentions it. */
  static void assertEachNamed(List<String> problems, String... named) {
    for (String name : named) {
      assertThat(problems).anySatisfy(problem -> assertThat(problem).contains(name));
    }
  }
}
