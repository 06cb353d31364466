package io.disaggusage.extproc.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.Main;
import io.disaggusage.extproc.simulation.engines.ScheduleOrder;
import io.disaggusage.extproc.simulation.replay.ReplayFixtures;
import io.disaggusage.extproc.simulation.replay.ReplayFixtures.Capture;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Inputs {@code replay} cannot use: exit status 2 and one message naming the file and what is wrong. */
class ReplayInputErrorsTest {
  @TempDir Path dir;
  Capture c;

  @BeforeEach
  void capture() throws Exception {
    c = ReplayFixtures.tensorRtLlm(dir, ScheduleOrder.CONTEXT_FIRST, false);
  }

  @AfterEach
  void restoreLogging() {
    CommandRun.restoreLogging();
  }

  private CommandRun replayWith(String... more) {
    List<String> args = new ArrayList<>(List.of("replay"));
    args.addAll(ReplayCommandTest.bodyFiles(c));
    args.addAll(List.of(more));
    return CommandRun.run(args.toArray(String[]::new));
  }

  private static void assertInputError(CommandRun run, String... messageParts) {
    assertThat(run.exitCode()).as(run.out() + run.err()).isEqualTo(Main.EXIT_CONFIG);
    assertThat(run.err()).contains(messageParts);
    assertThat(run.out()).isEmpty();
  }

  @Test
  void aMissingBodyFile() {
    Path missing = dir.resolve("nowhere.json");
    CommandRun run = CommandRun.run("replay", "--generation-request", c.generationRequest().toString(),
        "--generation-response", missing.toString());
    assertInputError(run, "replay: " + missing + ": cannot read: no such file");
  }

  @Test
  void aHeadersLineWithoutAColon() throws Exception {
    Path headers = Files.writeString(dir.resolve("gen.headers"), ":method: POST\ngarbage\n");
    assertInputError(replayWith("--generation-request-headers", headers.toString()),
        "replay: " + headers + ": line 2: expected \"name: value\", got \"garbage\"");
  }

  @Test
  void aStatusThatIsNotAStatusCodeAndAPseudoHeaderOfTheOtherDirection() throws Exception {
    Path response = Files.writeString(dir.resolve("gen-response.headers"), ":status: OK\n");
    assertInputError(replayWith("--generation-response-headers", response.toString()),
        response + ": line 1: :status must be a status code, got \"OK\"");
    Path request = Files.writeString(dir.resolve("ctx.headers"), "# ok\n:status: 200\n");
    assertInputError(replayWith("--context-request-headers", request.toString()),
        request + ": line 2: :status is not a request pseudo-header");
    Path badName = Files.writeString(dir.resolve("bad-name.headers"), "x request id: 1\n");
    assertInputError(replayWith("--context-request-headers", badName.toString()),
        badName + ": line 1: invalid header name \"x request id\"");
  }

  @Test
  void harFilesThatAreNotJsonOrMissAPart() throws Exception {
    Path notJson = Files.writeString(dir.resolve("a.har"), "{\"log\": ");
    assertInputError(CommandRun.run("replay", "--har", notJson.toString()), "replay: " + notJson + ": not JSON");
    Path noResponse = Files.writeString(dir.resolve("b.har"),
        "{\"log\": {\"entries\": [{\"request\": {\"method\": \"POST\", \"url\": \"/v1/chat/completions\"}}]}}");
    assertInputError(CommandRun.run("replay", "--har", noResponse.toString()), noResponse + ": entries[0].response: missing");
    String entry = "{\"request\": {\"url\": \"/v1/completions\"}, \"response\": {\"status\": 200}}";
    Path three = Files.writeString(dir.resolve("c.har"), "{\"entries\": [" + entry + "," + entry + "," + entry + "]}");
    assertInputError(CommandRun.run("replay", "--har", three.toString()),
        three + ": 3 entries: mark the two to replay with \"_leg\"");
    Path badBase64 = Files.writeString(dir.resolve("d.har"),
        "{\"entries\": [{\"request\": {\"url\": \"/v1/completions\"}, \"response\": {\"status\": 200,"
            + " \"content\": {\"text\": \"%%%\", \"encoding\": \"base64\"}}}]}");
    assertInputError(CommandRun.run("replay", "--har", badBase64.toString()),
        badBase64 + ": entries[0].response.content.text: not base64");
    Path badLeg = Files.writeString(dir.resolve("e.har"),
        "{\"entries\": [{\"_leg\": \"prefil\", \"request\": {\"url\": \"/v1/completions\"}, \"response\": {\"status\": 200}}]}");
    assertInputError(CommandRun.run("replay", "--har", badLeg.toString()),
        badLeg + ": entries[0]._leg: expected \"context\" or \"generation\", got \"prefil\"");
  }

  @Test
  void anEnvoyConfigWithoutTheFilter() throws Exception {
    Path envoy = Files.writeString(dir.resolve("envoy.yaml"), "static_resources:\n  listeners: []\n");
    assertInputError(replayWith("--envoy-config", envoy.toString()),
        "replay: " + envoy + ": no envoy.filters.http.ext_proc filter");
  }

  @Test
  void contextFilesByHalvesAndConflictingOptions() {
    CommandRun halves = CommandRun.run("replay", "--context-request", c.contextRequest().toString(),
        "--generation-request", c.generationRequest().toString(), "--generation-response", c.generationResponse().toString());
    assertInputError(halves, "give both --context-request and --context-response, or neither");
    assertInputError(replayWith("--har", c.generationResponse().toString()), "expected only one match");
    assertInputError(replayWith("--target", "localhost"), "--target: expected HOST:PORT, got \"localhost\"");
    assertInputError(replayWith("--chunk-size", "-1"), "--chunk-size must be positive");
    assertInputError(CommandRun.run("replay"), "Missing required argument");
  }

  @Test
  void anInvalidServiceConfiguration() {
    assertInputError(replayWith("--set", "ordering.context_wait=forever"), "ordering.context_wait");
  }
}
