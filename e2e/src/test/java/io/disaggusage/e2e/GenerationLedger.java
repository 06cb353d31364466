package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.AccessLogLine;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.e2e.TrueUsage.Usage;
import java.time.Duration;
import java.util.List;

/**
 * What the Envoy on the decode legs logged and the service counted for the chat completions of one
 * deployment: each exchange's access-log metadata and the {@code phase="generation"} exchange counter.
 */
final class GenerationLedger {
  private final RouterDeployment deployment;

  GenerationLedger(RouterDeployment deployment) {
    this.deployment = deployment;
  }

  /** The decode legs' chat (and legacy) completion lines, in the order they finished. */
  List<AccessLogLine> completions() {
    return deployment.decodeEnvoy.accessLog().stream()
        .filter(l -> isCompletion(l.path()) && deployment.decodeCluster.equals(l.cluster()))
        .toList();
  }

  /** A chat completions or legacy completions path. */
  static boolean isCompletion(String path) {
    return path.startsWith("/v1/chat/completions") || path.startsWith("/v1/completions");
  }

  /** Waits until {@code count} generation completions are logged and counted by the service as corrected. */
  void awaitCompletions(int count) {
    Processes.await(count + " generation exchanges logged and counted", Duration.ofSeconds(10),
        () -> completions().size() >= count && ServiceMetrics.correctedGenerations(deployment.service) >= count);
  }

  /**
   * The metadata Envoy logged for a generation exchange: the true counts, outcome {@code rewritten} —
   * {@code impossible_count} where the engine reported more cached tokens than the prompt has.
   */
  static void assertMetadata(AccessLogLine line, Usage truth) {
    assertThat(line.status()).isEqualTo(200);
    boolean impossible = Long.parseLong(line.field("reported_cached_tokens")) > Long.parseLong(line.field("prompt_tokens"));
    assertThat(line.field("usage_outcome")).as(line.toString()).isEqualTo(impossible ? "impossible_count" : "rewritten");
    assertThat(metadata(line)).as(line.toString()).isEqualTo(truth);
    assertThat(line.field("total_tokens")).as(line.toString()).isEqualTo(Long.toString(truth.total()));
  }

  /** The usage in a line's metadata ({@code -1} for a count Envoy printed as {@code -}). */
  static Usage metadata(AccessLogLine line) {
    return new Usage(count(line, "prompt_tokens"), count(line, "cached_tokens"), count(line, "completion_tokens"));
  }

  private static long count(AccessLogLine line, String field) {
    String value = line.field(field);
    return "-".equals(value) ? -1 : Long.parseLong(value);
  }
}
