package io.disaggusage.extproc.tools.sandbox;

import java.net.URI;
import java.util.Locale;

/**
 * What the sandbox prints once it is up: the two curl lines with the printed request (the first family,
 * TensorRT-LLM, whose generation worker counts the whole prompt as cached: the starkest numbers), what
 * the client should read from each, the other family's URLs, and where to look behind the scenes.
 */
final class SandboxBanner {
  private static final String HEADER =
      """
      disagg-usage-extproc sandbox: Envoy %s with the shipped deploy/envoy/envoy.yaml settings%s, in
      front of simulated TensorRT-LLM and vLLM prefill/decode workers and the service, all on 127.0.0.1.
      Envoy binary: %s (from %s). Ready %.1f s after start.

      """;

  private static final String CURL_LINES =
      """
      %1$s through the service (its worker calls pass Envoy's ext_proc filter):
        %2$s
      %1$s around the service (the same calls through Envoy listeners without the filter):
        %3$s

      What to look for: usage.prompt_tokens_details.cached_tokens of the %4$d prompt tokens. Through the
      service it is what the context worker's prefix cache really reused: %5$d on the first call (the
      system prompt, which the sandbox sent at start-up), %6$d once this prompt has been sent. Around it,
      it is %4$d: the generation worker counts the whole prompt it received as cached. Add "stream":true
      to the body for an event stream (curl -N): the usage event before [DONE] is corrected in flight.

      """;

  private static final String OTHER_FAMILY =
      """
      %s, the same body (its decode worker reports the prompt minus one as cached):
        through %s   around %s

      """;

  private static final String BEHIND_THE_SCENES =
      """
      Envoy admin      %1$s  (ext_proc counters: %1$sstats?filter=ext_proc)
      Envoy log        %2$s
                       (an access-log line per worker call: usage_outcome, cached_tokens, reported_cached_tokens)
      Envoy bootstrap  %3$s
      Service metrics  %4$s
                       (disagg_usage_tokens_total: kind="cached" as corrected, kind="cached_reported" as the engine said)

      Ctrl-C stops Envoy, the workers and the service.
      """;

  private SandboxBanner() {}

  static String render(Sandbox sandbox) {
    EnvoyProcess envoy = sandbox.envoy();
    StringBuilder out = new StringBuilder();
    out.append(
        String.format(
            Locale.ROOT,
            HEADER,
            envoy.version(),
            sandbox.messageTimeout().map(t -> " (but message_timeout " + t.toMillis() + "ms)").orElse(""),
            sandbox.envoyBinary().path(),
            sandbox.envoyBinary().source(),
            sandbox.readyAfter().toMillis() / 1000.0));
    for (String problem : sandbox.startupProblems()) {
      out.append("WARNING: ").append(problem).append('\n');
    }
    if (!sandbox.startupProblems().isEmpty()) {
      out.append("(Envoy's log says more: ").append(envoy.logFile()).append(")\n\n");
    }
    Family first = sandbox.families().get(0);
    String request = SeedRequest.json(SeedRequest.QUESTION, false);
    SeedRequest.Expected expected = SeedRequest.expected();
    out.append(
        String.format(
            Locale.ROOT,
            CURL_LINES,
            first.engine().name(),
            SeedRequest.curl(sandbox.orchestrator(first, Passage.THROUGH_SERVICE), request),
            SeedRequest.curl(sandbox.orchestrator(first, Passage.AROUND_SERVICE), request),
            expected.prompt(),
            expected.firstCached(),
            expected.repeatCached()));
    for (Family family : sandbox.families().subList(1, sandbox.families().size())) {
      out.append(
          String.format(
              OTHER_FAMILY,
              family.engine().name(),
              chatCompletions(sandbox.orchestrator(family, Passage.THROUGH_SERVICE)),
              chatCompletions(sandbox.orchestrator(family, Passage.AROUND_SERVICE))));
    }
    out.append(
        String.format(
            BEHIND_THE_SCENES,
            envoy.admin(),
            envoy.logFile(),
            sandbox.workDir().resolve("envoy.yaml"),
            sandbox.metrics()));
    return out.toString();
  }

  private static URI chatCompletions(URI orchestrator) {
    return orchestrator.resolve(LoopbackHttp.CHAT_COMPLETIONS);
  }
}
