package io.disaggusage.extproc.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The captures docs/demo-and-replay.md tells readers to replay still replay as the page shows. */
class DocsReplayExamplesTest {
  private static final Path EXAMPLES =
      Path.of(System.getProperty("project.root", "..")).resolve("docs/replay-examples").toAbsolutePath().normalize();

  @AfterEach
  void restoreLogging() {
    CommandRun.restoreLogging();
  }

  private static String file(String name) {
    return EXAMPLES.resolve(name).toString();
  }

  @Test
  void vllmBodyAndHeadersFiles() {
    CommandRun run =
        CommandRun.run(
            "replay", "--message-timeout", "2s",
            "--context-request", file("vllm/context-request.json"),
            "--context-request-headers", file("vllm/context-request.headers"),
            "--context-response", file("vllm/context-response.json"),
            "--generation-request", file("vllm/generation-request.json"),
            "--generation-request-headers", file("vllm/generation-request.headers"),
            "--generation-response", file("vllm/generation-response.sse"),
            "--generation-response-headers", file("vllm/generation-response.headers"));
    assertThat(run.exitCode()).as(run.out() + run.err()).isZero();
    assertThat(run.out())
        .startsWith("=== generation response body as the client gets it (3550 bytes) ===\n")
        .contains("\"prompt_tokens_details\":{\"cached_tokens\":16}}}\n\ndata: [DONE]\n\n=== dynamic metadata ===\n")
        .endsWith("rewritten: cached_tokens 29 -> 16, prompt_tokens 30, completion_tokens 12, total_tokens 42\n");
  }

  @Test
  void tensorRtLlmHarGenerationFirst() {
    CommandRun run =
        CommandRun.run("replay", "--message-timeout", "2s", "--har", file("trtllm-generation-first.har"), "--generation-first");
    assertThat(run.exitCode()).as(run.out() + run.err()).isZero();
    assertThat(run.out())
        .endsWith("rewritten: cached_tokens 21 -> 16, prompt_tokens 21, completion_tokens 8, total_tokens 29\n");
  }
}
