package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.testkit.Wire;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * A benchmark, not part of the suite (surefire runs {@code *Test} classes only): what reading a request
 * body for the prompt fingerprint costs a flow through real Envoy, where the headers alone would settle
 * it ({@code x-disagg-phase} and {@code x-disagg-request-id}). Two stacks on the newest pinned release,
 * one with the default {@code classification.trust_id_header: false} (Envoy streams each request body
 * through the service) and one with {@code true} (Envoy sends no body), take turns round by round; each
 * flow is a context and a generation leg, sequential, one at a time. It prints the client-observed
 * latency of whole flows and the ratio measured in this run, and how many flows were not corrected (a message timeout on a loaded machine).
 *
 * <p>Run: {@code mvn -o -pl e2e -am verify -Dtest=RequestBodyReadBench -Dsurefire.failIfNoSpecifiedTests=false
 * -Djacoco.skip=true}; the table is in {@code e2e/target/surefire-reports/*RequestBodyReadBench-output.txt}.
 */
class RequestBodyReadBench {
  private static final String PATH = "/v1/chat/completions";
  private static final int[] BODY_BYTES = {1024, 64 * 1024, 512 * 1024};
  private static final int ROUNDS = Integer.getInteger("bench.rounds", 6);
  private static final int FLOWS_PER_ROUND = Integer.getInteger("bench.flows", 50);
  private static final Map<Stack, Integer> UNCORRECTED = new java.util.concurrent.ConcurrentHashMap<>();

  @Test
  void readingTheBodyForTheFingerprint() throws Exception {
    List<String> releases = Tools.envoyReleases();
    String release = releases.get(0);
    try (Stack read = Stack.start("bench-read", release, 1);
        Stack trusted = Stack.start("bench-trusted", release, 1, "--set", "classification.trust_id_header=true")) {
      for (Stack s : List.of(read, trusted)) {
        s.context.answer(r -> Worker.Reply.paced("application/json", utf8(Wire.chatCompletion("c", Wire.usage(500, 1, 200L))), 1, Duration.ZERO));
        s.generation.answer(r -> Worker.Reply.paced("application/json", utf8(Wire.chatCompletion("g", Wire.usage(500, 9, 500L))), 1, Duration.ZERO));
      }
      StringBuilder table = new StringBuilder(String.format(Locale.ROOT,
          "%nEnvoy %s, %d rounds x %d flows per stack and size (context + generation leg, sequential)%n"
              + "| request body | body read p50 / p90 | not read p50 / p90 | p50 ratio |%n|---|---|---|---|%n",
          release, ROUNDS, FLOWS_PER_ROUND));
      for (int size : BODY_BYTES) {
        byte[] body = utf8(chatRequest(size));
        run(read, body, 20);
        run(trusted, body, 20); // warm-up
        List<Long> readNanos = new ArrayList<>();
        List<Long> trustedNanos = new ArrayList<>();
        for (int round = 0; round < ROUNDS; round++) {
          readNanos.addAll(run(read, body, FLOWS_PER_ROUND));
          trustedNanos.addAll(run(trusted, body, FLOWS_PER_ROUND));
        }
        long[] r = sorted(readNanos);
        long[] t = sorted(trustedNanos);
        table.append(String.format(Locale.ROOT, "| %d KiB | %.2f / %.2f ms | %.2f / %.2f ms | %.2f |%n",
            size / 1024, ms(pct(r, 50)), ms(pct(r, 90)), ms(pct(t, 50)), ms(pct(t, 90)), (double) pct(r, 50) / pct(t, 50)));
      }
      table.append(String.format(Locale.ROOT, "flows not corrected: body read %d, not read %d%n",
          UNCORRECTED.getOrDefault(read, 0), UNCORRECTED.getOrDefault(trusted, 0)));
      System.out.println(table);
    }
  }

  /** {@code n} flows one after another; the latency of each whole flow. */
  private static List<Long> run(Stack stack, byte[] body, int n) {
    List<Long> nanos = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      String id = "bench-" + System.nanoTime();
      long start = System.nanoTime();
      Orchestrator.post(stack.envoy.contextUrl(PATH), Map.of("x-disagg-phase", "context", "x-disagg-request-id", id), body).join();
      Orchestrator.Answer gen =
          Orchestrator.post(stack.envoy.generationUrl(PATH), Map.of("x-disagg-phase", "generation", "x-disagg-request-id", id), body)
              .join();
      nanos.add(System.nanoTime() - start);
      assertThat(gen.status()).isEqualTo(200);
      if (!gen.text().contains("\"cached_tokens\":200")) {
        UNCORRECTED.merge(stack, 1, Integer::sum); // printed: a loaded machine can time out a message
      }
    }
    return nanos;
  }

  /** A chat request of about {@code size} bytes: a multi-turn conversation of short messages. */
  static String chatRequest(int size) {
    StringBuilder b = new StringBuilder("{\"model\":\"" + Wire.MODEL + "\",\"messages\":[");
    for (int turn = 0; b.length() < size - 100; turn++) {
      b.append(turn == 0 ? "" : ",").append("{\"role\":\"").append(turn % 2 == 0 ? "user" : "assistant")
          .append("\",\"content\":\"turn ").append(turn).append(": the quick brown fox jumps over the lazy dog\"}");
    }
    return b.append("],\"max_tokens\":64,\"stream\":false}").toString();
  }

  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  private static long[] sorted(List<Long> values) {
    long[] a = values.stream().mapToLong(Long::longValue).toArray();
    Arrays.sort(a);
    return a;
  }

  private static long pct(long[] sorted, int p) {
    return sorted[Math.min(sorted.length - 1, sorted.length * p / 100)];
  }

  private static double ms(long nanos) {
    return nanos / 1e6;
  }
}
