package io.disaggusage.extproc.simulation.sandbox;

import io.disaggusage.extproc.simulation.ClientUsage;
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
 * The requests the sandbox sends itself before it prints anything: per family, a request sharing the
 * printed one's system prompt, through the service and then around it. They put that prompt in the
 * context workers' caches and run every part once, and they check the wiring: on a fresh cache the
 * context worker reused nothing, so the client must read 0 cached tokens through the service, and the
 * generation worker's count (more than 0) around it.
 */
final class StartupCheck {
  private static final Duration TIMEOUT = Duration.ofSeconds(30);

  private StartupCheck() {}

  /** What went wrong, one line each; empty when every family was corrected through the service only. */
  static List<String> run(HttpClient client, List<Family> families, BiFunction<Family, Passage, URI> orchestrator) {
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
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          problems.add(where + ": interrupted");
          return problems;
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
