package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.AccessLogLine;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.e2e.TrueUsage.Usage;
import io.disaggusage.extproc.testkit.Wire;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.IntFunction;
import java.util.function.IntPredicate;
import java.util.function.Supplier;

/**
 * {@link #FLOWS} clients with distinct prompts through a router: each prompt once in turn (JSON, filling
 * the prefill's cache), then all at once (hitting it), some streamed. Prompt {@code i} is 16 tokens longer
 * than prompt {@code i-1} and asks for one token more, so every flow's true prompt, cached, completion and
 * total counts are its own, and each client must read exactly its own.
 */
final class ConcurrentFlows {
  static final int FLOWS = 16;
  /** The {@code X-Request-Id} every client sends in the tests of clients sharing one (an SDK's fixed default header). */
  static final String FIXED_REQUEST_ID = "sdk-default-request-id";

  /** One client call: sends flow {@code flow}'s chat {@code body} (SSE when {@code stream}), returns the usage it read. */
  interface Client {
    Usage send(int flow, String body, boolean stream);
  }

  /** Every client body in the order sent (the concurrent round after the first) with its truth. */
  record Sent(List<String> bodies, List<Usage> expected) {}

  private ConcurrentFlows() {}

  /**
   * Runs both rounds; {@code truthOf(flow)} mirrors the prefill worker flow {@code flow} goes to,
   * {@code streamed} picks the flows of the concurrent round that stream, and {@code diagnostics} is added
   * to a failed client's message.
   */
  static Sent run(IntFunction<TrueUsage> truthOf, IntPredicate streamed, Client client, Supplier<String> diagnostics)
      throws Exception {
    return run(FLOWS, truthOf, streamed, client, diagnostics);
  }

  /** {@link #run(IntFunction, IntPredicate, Client, Supplier)} with {@code flows} clients instead of {@link #FLOWS}. */
  static Sent run(int flows, IntFunction<TrueUsage> truthOf, IntPredicate streamed, Client client, Supplier<String> diagnostics)
      throws Exception {
    List<String> bodies = new ArrayList<>();
    List<Usage> expected = new ArrayList<>();
    for (int i = 0; i < flows; i++) { // first sight of each prompt: fills its prefill's cache
      bodies.add(body(i, false));
      expected.add(truthOf.apply(i).next(prompt(i), maxTokens(i), 1));
      assertThat(client.send(i, bodies.get(i), false)).as("flow " + i + " alone").isEqualTo(expected.get(i));
    }
    ExecutorService clients = Executors.newFixedThreadPool(flows);
    try {
      List<CompletableFuture<Usage>> read = new ArrayList<>();
      for (int i = 0; i < flows; i++) {
        int flow = i;
        boolean stream = streamed.test(i);
        String body = body(i, stream);
        bodies.add(body);
        expected.add(truthOf.apply(i).next(prompt(i), maxTokens(i), 1));
        read.add(CompletableFuture.supplyAsync(() -> client.send(flow, body, stream), clients));
      }
      List<Usage> concurrent = expected.subList(flows, 2 * flows);
      assertThat(concurrent.stream().map(Usage::cached).distinct()).as("every flow's truth is its own").hasSize(flows);
      for (int i = 0; i < flows; i++) {
        assertThat(read.get(i).get()).as("flow " + i + " among all at once; " + diagnostics.get()).isEqualTo(concurrent.get(i));
      }
    } finally {
      clients.shutdownNow();
    }
    return new Sent(bodies, expected);
  }

  /**
   * The decode Envoy's chat completion lines hold each flow's truth once, and the service counted every
   * generation exchange corrected (none {@code fingerprint_mismatch} or passed through).
   */
  static void assertEachTruthOnce(List<AccessLogLine> generationLines, ServiceProcess service, List<Usage> expected) {
    assertThat(generationLines.stream().map(GenerationLedger::metadata).toList())
        .as("the access log holds each flow's own truth once")
        .containsExactlyInAnyOrderElementsOf(expected);
    ServiceMetrics.assertAllCorrected(service, expected.size()); // none fingerprint_mismatch or passed through
  }

  /** Prompt {@code i}: its own first word and 16 tokens more than prompt {@code i-1}. */
  static String prompt(int i) {
    return "Flow" + i + " " + String.join(" ", Collections.nCopies(18 + 16 * i, "tokens"));
  }

  static int maxTokens(int flow) {
    return 1 + flow;
  }

  private static String body(int flow, boolean stream) {
    return RouterClients.chat(Wire.MODEL, prompt(flow), maxTokens(flow), 1, stream);
  }
}
