package io.disaggusage.extproc.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.Main;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.io.Writer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import picocli.CommandLine;

/** {@code workers}: options checked at start, one line per worker, stopped on an interrupt. */
class WorkersCommandTest {

  @AfterEach
  void restoreLogging() {
    CommandRun.restoreLogging();
  }

  @ParameterizedTest
  @CsvSource(
      delimiter = '|',
      value = {
        "--engine tgi --decode 127.0.0.1:0|--engine: \"tgi\": expected trtllm, vllm or sglang",
        "--engine vllm --decode 127.0.0.1:0 --usage broken|--usage: \"broken\": expected bug, whole-prompt-bug or fixed",
        "--engine trtllm --decode 127.0.0.1:0 --usage whole-prompt-bug|--usage: TensorRT-LLM has no whole-prompt-bug variant",
        "--engine vllm|give at least one --prefill or --decode",
        "--engine sglang --prefill 127.0.0.1:0|--prefill-bootstrap-port: give one per --prefill (1), got 0",
        "--engine vllm --prefill 127.0.0.1:0 --prefill-bootstrap-port 8998|--prefill-bootstrap-port: only SGLang prefill workers",
        "--engine vllm --decode localhost|--decode: \"localhost\": expected HOST:PORT",
        "--engine vllm --decode 127.0.0.1:http|--decode: For input string",
        "--engine vllm --decode 127.0.0.1:70000|--decode: 70000: expected a port from 1 to 65535, or 0 for any free one",
        "--engine vllm --decode 127.0.0.1:0 --token-delay -1s|--token-delay"
      })
  void badOptionsFailAtStartNamingTheOption(String args, String message) {
    CommandRun run = CommandRun.run(("workers " + args).split(" "));
    assertThat(run.exitCode()).isEqualTo(CommandLine.ExitCode.USAGE);
    assertThat(run.err()).contains(message);
  }

  @Test
  void startsEveryWorkerPrintsOneLineEachAndStopsOnInterrupt() throws Exception {
    PrintedLines out = new PrintedLines(3);
    CommandLine commandLine = Main.commandLine(new Main(Map.of()));
    commandLine.setOut(new PrintWriter(out, true));
    commandLine.setErr(new PrintWriter(new StringWriter(), true));
    Thread command =
        new Thread(
            () ->
                commandLine.execute(
                    "workers", "--engine", "sglang", "--prefill", "127.0.0.1:0", "--prefill-bootstrap-port", "0",
                    "--decode", "127.0.0.1:0", "--decode", "127.0.0.1:0", "--usage", "fixed", "--model", "llama"));
    command.start();
    try {
      out.await(Duration.ofSeconds(10));
      List<String> lines = out.toString().lines().toList();
      assertThat(lines).hasSize(3);
      assertThat(lines.get(0)).matches("sglang prefill http://127\\.0\\.0\\.1:\\d+/ bootstrap-port \\d+");
      assertThat(lines.get(1)).matches("sglang decode http://127\\.0\\.0\\.1:\\d+/");
      String url = lines.get(1).split(" ")[2];
      HttpResponse<String> models =
          HttpClient.newHttpClient()
              .send(HttpRequest.newBuilder(URI.create(url + "v1/models")).build(), HttpResponse.BodyHandlers.ofString());
      assertThat(models.body()).contains("\"id\":\"llama\"");
    } finally {
      command.interrupt();
      command.join(10_000);
    }
    assertThat(command.isAlive()).isFalse();
  }

  /** What the command prints, with a latch counted down by each line ended. */
  private static final class PrintedLines extends Writer {
    private final StringBuffer text = new StringBuffer();
    private final CountDownLatch lines;

    PrintedLines(int expected) {
      this.lines = new CountDownLatch(expected);
    }

    @Override
    public void write(char[] chars, int offset, int length) {
      text.append(chars, offset, length);
      for (int i = offset; i < offset + length; i++) {
        if (chars[i] == '\n') {
          lines.countDown();
        }
      }
    }

    @Override
    public void flush() {}

    @Override
    public void close() {}

    /** Waits until the expected lines have been printed. */
    void await(Duration limit) throws InterruptedException {
      assertThat(lines.await(limit.toMillis(), TimeUnit.MILLISECONDS)).as("lines printed: %s", text).isTrue();
    }

    @Override
    public String toString() {
      return text.toString();
    }
  }
}
