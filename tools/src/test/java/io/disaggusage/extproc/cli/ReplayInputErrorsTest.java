package io.disaggusage.extproc.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.Main;
import io.disaggusage.extproc.emulator.engines.ScheduleOrder;
import io.disaggusage.extproc.tools.replay.ReplayFixtures;
import io.disaggusage.extproc.tools.replay.ReplayFixtures.Capture;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

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

  /**
   * A file given as {@code option} with {@code content} (written under {@code name}): the input error
   * names the file and the problem.
   */
  @ParameterizedTest(name = "{0} {1}")
  @MethodSource("unreadableFiles")
  void aFileTheOptionCannotRead(String option, String name, String content, String problem) throws Exception {
    Path file = Files.writeString(dir.resolve(name), content);
    assertInputError(replayWith(option, file.toString()), "replay: " + file + ": " + problem);
  }

  static Stream<Arguments> unreadableFiles() {
    return Stream.of(
        Arguments.of("--generation-request-headers", "gen.headers", ":method: POST\ngarbage\n",
            "line 2: expected \"name: value\", got \"garbage\""),
        Arguments.of("--generation-response-headers", "gen-response.headers", ":status: OK\n",
            "line 1: :status must be a status code, got \"OK\""),
        Arguments.of("--context-request-headers", "ctx.headers", "# ok\n:status: 200\n",
            "line 2: :status is not a request pseudo-header"),
        Arguments.of("--context-request-headers", "bad-name.headers", "x request id: 1\n",
            "line 1: invalid header name \"x request id\""),
        Arguments.of("--envoy-config", "envoy.yaml", "static_resources:\n  listeners: []\n",
            "no envoy.filters.http.ext_proc filter"));
  }

  /** Replays a HAR file with this content; asserts the input error naming it and the problem. */
  private void assertHarError(String content, String problem) throws Exception {
    Path file = Files.writeString(dir.resolve("capture-" + content.hashCode() + ".har"), content);
    assertInputError(CommandRun.run("replay", "--har", file.toString()), "replay: " + file + ": " + problem);
  }

  @Test
  void harFilesThatAreNotJsonOrMissAPart() throws Exception {
    assertHarError("{\"log\": ", "not JSON");
    assertHarError("{\"log\": {\"entries\": [{\"request\": {\"method\": \"POST\", \"url\": \"/v1/chat/completions\"}}]}}",
        "entries[0].response: missing");
    String entry = "{\"request\": {\"url\": \"/v1/completions\"}, \"response\": {\"status\": 200}}";
    assertHarError("{\"entries\": [" + entry + "," + entry + "," + entry + "]}",
        "3 entries: mark the two to replay with \"_leg\"");
    assertHarError("{\"entries\": [{\"request\": {\"url\": \"/v1/completions\"}, \"response\": {\"status\": 200,"
            + " \"content\": {\"text\": \"%%%\", \"encoding\": \"base64\"}}}]}",
        "entries[0].response.content.text: not base64");
    assertHarError("{\"entries\": [{\"_leg\": \"prefil\", \"request\": {\"url\": \"/v1/completions\"}, \"response\": {\"status\": 200}}]}",
        "entries[0]._leg: expected \"context\" or \"generation\", got \"prefil\"");
    assertHarError("{\"entries\": [{\"request\": {\"url\": \"/v1\"}, \"response\": {\"status\": 99}}]}",
        "entries[0].response.status: expected a status code, got 99");
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

  /** What replay's in-process service never reads is refused, not silently ignored. */
  @Test
  void flagsForAListenerAnAdminPortOrAStoreBackEndAreRefused() {
    String why = "does not apply to replay: its service runs in this process";
    assertInputError(replayWith("--grpc-port", "9002"), "--grpc-port " + why);
    assertInputError(replayWith("--admin-port", "9090"), "--admin-port " + why);
    assertInputError(replayWith("--set", "store.type=redis"), "--set store.type " + why);
    assertInputError(replayWith("--set", "store.redis_uri=redis://r:6379"), "--set store.redis_uri " + why);
    assertInputError(replayWith("-s", "grpc.listen=unix:///tmp/x.sock"), "--set grpc.listen " + why);
    assertInputError(replayWith("--set", "shutdown.drain_timeout=1s"), "--set shutdown.drain_timeout " + why);
  }

  @Test
  void keysTheInProcessServiceReadsAreAccepted() {
    CommandRun run = replayWith("--set", "store.ttl=30s", "--set", "grpc.max_inbound_message_bytes=32MiB",
        "--set", "ordering.context_wait=1s");
    assertThat(run.exitCode()).as(run.err()).isZero();
  }

  @Test
  void anInvalidServiceConfiguration() {
    assertInputError(replayWith("--set", "ordering.context_wait=forever"), "ordering.context_wait");
  }
}
