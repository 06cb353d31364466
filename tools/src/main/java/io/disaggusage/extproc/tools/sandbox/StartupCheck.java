package io.disaggusage.extproc.tools.sandbox;

import io.disaggusage.extproc.tools.ClientUsage;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BiFunction;

/**
 * The requests the sandbox sends itself before it prints anything. First warm-up requests through the
 * service, whose answers do not count: the service warms up in process before it listens, but its
 * first exchanges over Envoy's fresh connection can still miss Envoy's 200 ms message timeout on a
 * busy machine (Envoy then lets them through uncorrected). Then per family a request sharing the
 * printed one's system prompt, through the service and around it: they put that prompt in the context
 * workers' caches, and check the wiring: on a fresh cache the context worker reused nothing, so the
 * client must read 0 cached tokens through the service, and the generation worker's count (more than
 * 0) around it.
 */
final class StartupCheck {
  private static final Duration TIMEOUT = Duration.ofSeconds(30);
  /** JSON and streamed warm-up requests per family; a few exchanges get the transport's code compiled. */
  private static final int WARM_UP_ROUNDS = 2;

  private StartupCheck() {}

  /** What went wrong, one line each; empty when every family was corrected through the service only. */
  static List<String> run(HttpClient client, List<Family> families, BiFunction<Family, Passage, URI> orchestrator)
      throws InterruptedException {
    for (int round = 0; round < WARM_UP_ROUNDS; round++) {
      for (Family family : families) {
        for (boolean stream : new boolean[] {false, true}) {
          try {
            post(client, orchestrator.apply(family, Passage.THROUGH_SERVICE), SeedRequest.warmUpJson(stream));
          } catch (IOException e) {
            // the checked requests below report what is wrong
          }
        }
      }
    }
    List<String> problems = new ArrayList<>();
    String body = SeedRequest.json(SeedRequest.STARTUP_QUESTION, false);
    for (Family family : families) {
      for (Passage passage : Passage.values()) {
        String where = family.engine().name() + " " + passage.description();
        try {
          HttpResponse<byte[]> response = post(client, orchestrator.apply(family, passage), body);
          long cached = ClientUsage.read(response.body()).map(ClientUsage::cached).orElse(-1L);
          boolean expected = passage.extProc() ? cached == 0 : cached > 0;
          if (response.statusCode() != 200 || !expected) {
            problems.add(
                where + ": the start-up request got status " + response.statusCode() + " and cached_tokens " + cached
                    + (passage.extProc() ? ", not the context worker's 0" : ", not the generation worker's count"));
          }
        } catch (IOException e) {
          problems.add(where + ": the start-up request failed: " + e);
        }
      }
    }
    return problems;
  }

  private static HttpResponse<byte[]> post(HttpClient client, URI orchestrator, String body)
      throws IOException, InterruptedException {
    return client.send(
        HttpRequest.newBuilder(orchestrator.resolve(LoopbackHttp.CHAT_COMPLETIONS))
            .timeout(TIMEOUT)
            .header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body))
            .build(),
        HttpResponse.BodyHandlers.ofByteArray());
  }
}
