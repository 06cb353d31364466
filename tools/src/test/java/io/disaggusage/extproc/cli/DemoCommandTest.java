package io.disaggusage.extproc.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** {@code demo} as a user runs it: no configuration, a table on stdout whose numbers tell the story. */
class DemoCommandTest {
  private static final Pattern ROW =
      Pattern.compile(
          "(TensorRT-LLM|vLLM) (JSON|SSE) (context-first|generation-first) +(1st|2nd) +(\\d+) +(\\d+) +(\\d+)"
              + " +(\\d+) +(\\d+) +(\\d+) +(\\S+)");

  /** One table row as printed. */
  record Row(
      String engine, String format, String order, boolean repeat, long prompt, long without, long with,
      long truth, long completion, long total, String outcome) {}

  static List<Row> rows(String table) {
    List<Row> rows = new ArrayList<>();
    for (String line : table.split("\n")) {
      Matcher m = ROW.matcher(line.strip());
      if (m.matches()) {
        rows.add(
            new Row(m.group(1), m.group(2), m.group(3), m.group(4).equals("2nd"), Long.parseLong(m.group(5)),
                Long.parseLong(m.group(6)), Long.parseLong(m.group(7)), Long.parseLong(m.group(8)),
                Long.parseLong(m.group(9)), Long.parseLong(m.group(10)), m.group(11)));
      }
    }
    return rows;
  }

  @AfterEach
  void restoreLogging() {
    CommandRun.restoreLogging();
  }

  @Test
  void theTableShowsTheBugWithoutTheServiceAndTheTruthWithIt() {
    // A longer message timeout than the shipped 200 ms: the build machine is shared and can stall.
    CommandRun run = CommandRun.run("demo", "--message-timeout", "2s");

    assertThat(run.exitCode()).as(run.out() + run.err()).isZero();
    List<Row> rows = rows(run.out());
    assertThat(rows).hasSize(12);
    assertThat(rows.stream().map(r -> r.engine() + " " + r.format() + " " + r.order()).distinct())
        .containsExactly(
            "TensorRT-LLM JSON context-first", "TensorRT-LLM SSE context-first",
            "TensorRT-LLM JSON generation-first", "TensorRT-LLM SSE generation-first",
            "vLLM JSON context-first", "vLLM SSE context-first");
    for (Row r : rows) {
      // Without the service: the generation worker's figure, the whole transferred prompt (NIXL: minus one).
      assertThat(r.without()).as(r.toString()).isEqualTo(r.engine().equals("vLLM") ? r.prompt() - 1 : r.prompt());
      // With it: the context worker's prefix cache, nothing on the cache-busted request, full blocks on the repeat.
      assertThat(r.with()).as(r.toString()).isEqualTo(r.truth());
      assertThat(r.truth()).as(r.toString()).isEqualTo(r.repeat() ? (r.prompt() - 1) / 16 * 16 : 0);
      assertThat(r.truth()).as(r.toString()).isEqualTo(r.repeat() ? 112 : 0);
      assertThat(r.total()).isEqualTo(r.prompt() + r.completion());
      assertThat(r.completion()).isPositive();
      assertThat(r.outcome()).isEqualTo("rewritten");
    }
    long prompt = rows.stream().mapToLong(Row::prompt).sum();
    long truth = rows.stream().mapToLong(Row::truth).sum();
    assertThat(run.out())
        .contains(String.format(java.util.Locale.ROOT, "true                  %.1f %%", 100.0 * truth / prompt))
        .contains(String.format(java.util.Locale.ROOT, "with the service      %.1f %%", 100.0 * truth / prompt))
        .contains("OK: all 12 responses reached the client with the context worker's prompt and cached tokens.")
        .contains("simple deterministic word tokenizer")
        .containsPattern("service, running in this process on 127\\.0\\.0\\.1:\\d+");
    assertThat(run.err()).isEmpty();
  }

  @Test
  void anInvalidTimeoutIsACommandLineError() {
    CommandRun run = CommandRun.run("demo", "--message-timeout", "soon");
    assertThat(run.exitCode()).isEqualTo(2);
    assertThat(run.err()).contains("--message-timeout").contains("soon");
  }

  @Test
  void helpNamesTheCommandAndItsExitCodes() {
    CommandRun run = CommandRun.run("demo", "--help");
    assertThat(run.exitCode()).isZero();
    assertThat(run.out()).contains("Usage: disagg-usage-extproc demo", "--message-timeout", "Exit codes:");
  }
}
