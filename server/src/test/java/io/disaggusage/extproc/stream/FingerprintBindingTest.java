package io.disaggusage.extproc.stream;

import static io.disaggusage.extproc.stream.FaultInjectionTest.PATH;
import static io.disaggusage.extproc.stream.FaultInjectionTest.assertNoLeak;
import static io.disaggusage.extproc.stream.FaultInjectionTest.config;
import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.classify.PromptFingerprint;
import io.disaggusage.extproc.classify.RequestBodyReader;
import io.disaggusage.extproc.classify.RequestHead;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.scenario.Flows;
import io.disaggusage.extproc.scenario.ServiceUnderTest;
import io.disaggusage.extproc.testkit.Wire;
import io.disaggusage.extproc.emulator.envoy.EnvoyProfile;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.store.ContextUsageStore;
import io.disaggusage.extproc.store.ForwardingStore;
import io.disaggusage.extproc.usage.ContextUsage;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/**
 * Issue 16 through the fake Envoy: a context usage is bound to (key, fingerprint), so neither a
 * colliding {@code X-Request-Id} nor a forged context leg can move another flow's numbers.
 *
 * <p>The first two tests need the request scanners to compute the fingerprint (the other half of issue
 * 16); until they do, every leg is unbound and the tests are skipped, not passed. Their bodies differ in
 * {@code messages} so that their fingerprints differ once computed. The others bind the stored usage
 * to a foreign fingerprint themselves and run today: they check what the service does with a mismatch.
 */
class FingerprintBindingTest {
  static final String KEY = "sdk-fixed-id-4711";
  static final String PROMPT_A = "Tenant A asks: what is the capital of France?";
  static final String PROMPT_B = "Tenant B asks for a long essay on the history of the Loire valley.";

  private final Logger streamLog = (Logger) LoggerFactory.getLogger(ExchangeStream.class);
  private final ListAppender<ILoggingEvent> warnings = new ListAppender<>();

  @BeforeEach
  void captureWarnings() {
    warnings.start();
    streamLog.addAppender(warnings);
  }

  @AfterEach
  void release() {
    streamLog.detachAppender(warnings);
  }

  /** A chat request body of one leg: the prompt is what the fingerprint covers. */
  static String request(String prompt, boolean context) {
    return "{\"model\":\"" + Wire.MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"" + prompt + "\"}],"
        + "\"max_tokens\":64,\"kv_transfer_params\":{\"" + (context ? "do_remote_decode" : "do_remote_prefill")
        + "\":true}}";
  }

  static Exchange.Builder leg(String header, String key, String prompt, boolean context, String usage) {
    return leg(header, key, prompt, context, "application/json", Wire.chatCompletion(context ? "ctx" : "gen", usage));
  }

  static Exchange.Builder leg(
      String header, String key, String prompt, boolean context, String contentType, String responseBody) {
    return Exchange.post(PATH, request(prompt, context))
        .requestHeader("content-type", "application/json")
        .requestHeader(header, key)
        .responseHeader("content-type", contentType)
        .responseBody(responseBody)
        .responseContentLength();
  }

  /** The request scanners compute a fingerprint for these bodies (without it both cases could not hold). */
  static boolean fingerprintsComputed() {
    RequestHead head = new RequestHead("POST", PATH, Map.of("content-type", "application/json"), "");
    RequestBodyReader reader = RequestBodyReader.forRequest(head, new JsonFactory(), 64 * 1024);
    reader.feed(ByteBuffer.wrap(request(PROMPT_A, true).getBytes(StandardCharsets.UTF_8)));
    reader.end();
    return reader.facts().fingerprint() != null;
  }

  static String outcome(ExchangeResult r) {
    return r.accessLog("%DYNAMIC_METADATA(disagg_usage:outcome)%");
  }

  static String metadata(ExchangeResult r, String field) {
    return r.accessLog("%DYNAMIC_METADATA(disagg_usage:" + field + ")%");
  }

  @Test
  void twoFlowsWithOneRequestIdEachGetTheirOwnUsage() throws Exception {
    assertThat(fingerprintsComputed()).as("the request scanners compute the fingerprint").isTrue();
    try (ServiceUnderTest s = new ServiceUnderTest(config(64 * 1024 * 1024))) {
      assertClean(Flows.run(s.envoy, leg("x-request-id", KEY, PROMPT_A, true, Wire.usage(120, 1, 64L))));
      assertClean(Flows.run(s.envoy, leg("x-request-id", KEY, PROMPT_B, true, Wire.usage(610, 1, 0L))));
      ExchangeResult genA = Flows.run(s.envoy, leg("x-request-id", KEY, PROMPT_A, false, Wire.usage(120, 9, 120L)));
      ExchangeResult genB = Flows.run(s.envoy, leg("x-request-id", KEY, PROMPT_B, false, Wire.usage(610, 7, 610L)));

      for (ExchangeResult g : List.of(genA, genB)) {
        assertClean(g);
        assertThat(outcome(g)).isEqualTo("rewritten");
      }
      assertThat(metadata(genA, "prompt_tokens")).isEqualTo("120");
      assertThat(metadata(genA, "cached_tokens")).isEqualTo("64");
      assertThat(genA.clientResponse().bodyUtf8()).contains("\"prompt_tokens\":120").contains("\"cached_tokens\":64");
      assertThat(metadata(genB, "prompt_tokens")).isEqualTo("610");
      assertThat(metadata(genB, "cached_tokens")).isEqualTo("0");
      assertThat(genB.clientResponse().bodyUtf8()).contains("\"prompt_tokens\":610").contains("\"cached_tokens\":0");
      assertNoLeak(s);
    }
  }

  /**
   * An edge that forgot to strip {@code x-disagg-*}: an attacker's context leg under the victim's
   * {@code x-disagg-request-id}. Its phase and key come from headers, so its body may not be read (an
   * unbound entry) or may be (another prompt's fingerprint): either way the victim's own entry stays.
   */
  @Test
  void aForgedContextLegCannotMoveTheVictimsUsage() throws Exception {
    assertThat(fingerprintsComputed()).as("the request scanners compute the fingerprint").isTrue();
    String victim = "victim-flow-1";
    String prompt = "Victim's long document, summarise it: " + "lorem ipsum ".repeat(40);
    try (ServiceUnderTest s = new ServiceUnderTest(config(64 * 1024 * 1024))) {
      assertClean(Flows.run(s.envoy, leg("x-disagg-request-id", victim, prompt, true, Wire.usage(450, 1, 384L))));
      ExchangeResult forged =
          Flows.run(
              s.envoy,
              leg("x-disagg-request-id", victim, "hi", true, Wire.usage(3, 1, 0L)).requestHeader("x-disagg-phase", "context"));
      assertClean(forged);
      ExchangeResult gen = Flows.run(s.envoy, leg("x-disagg-request-id", victim, prompt, false, Wire.usage(450, 12, 450L)));

      assertClean(gen);
      assertThat(outcome(gen)).isEqualTo("rewritten");
      assertThat(metadata(gen, "prompt_tokens")).isEqualTo("450");
      assertThat(metadata(gen, "cached_tokens")).isEqualTo("384");
      assertThat(gen.clientResponse().bodyUtf8()).contains("\"prompt_tokens\":450").contains("\"cached_tokens\":384");
    }
  }

  /**
   * A proxy that appends its own {@code X-Request-Id} to the client's without joining them (llm-d's
   * sidecar does this; Envoy joins the two into {@code client,uuid}, another proxy may not): the
   * service reads the first, the client's, which every flow of that client shares. Both forms.
   */
  @Test
  void duplicateRequestIdHeadersKeyOnTheFirstAndStillBindEachFlow() throws Exception {
    try (ServiceUnderTest s = new ServiceUnderTest(config(64 * 1024 * 1024))) {
      assertClean(Flows.run(s.envoy, leg("x-request-id", KEY, PROMPT_A, true, Wire.usage(120, 1, 64L))
          .requestHeader("x-request-id", "proxy-uuid-a")));
      assertClean(Flows.run(s.envoy, leg("x-request-id", KEY, PROMPT_B, true, Wire.usage(610, 1, 0L))
          .requestHeader("x-request-id", "proxy-uuid-b")));
      ExchangeResult genB = Flows.run(s.envoy, leg("x-request-id", KEY, PROMPT_B, false, Wire.usage(610, 7, 610L))
          .requestHeader("x-request-id", "proxy-uuid-b2"));
      ExchangeResult genA = Flows.run(s.envoy, leg("x-request-id", KEY, PROMPT_A, false, Wire.usage(120, 9, 120L))
          .requestHeader("x-request-id", "proxy-uuid-a2"));

      assertThat(genA.upstreamRequest().headers().getAll("x-request-id"))
          .as("the worker got both headers").containsExactly(KEY, "proxy-uuid-a2");
      assertThat(metadata(genA, "prompt_tokens")).isEqualTo("120");
      assertThat(metadata(genA, "cached_tokens")).isEqualTo("64");
      assertThat(metadata(genB, "prompt_tokens")).isEqualTo("610");
      assertThat(metadata(genB, "cached_tokens")).isEqualTo("0");

      // Joined as Envoy joins them: a value unique per flow, nothing shared.
      assertClean(Flows.run(s.envoy, leg("x-request-id", KEY + ",uuid-1", PROMPT_A, true, Wire.usage(120, 1, 64L))));
      ExchangeResult joined = Flows.run(s.envoy, leg("x-request-id", KEY + ",uuid-1", PROMPT_A, false, Wire.usage(120, 9, 120L)));
      assertThat(outcome(joined)).isEqualTo("rewritten");
      assertThat(metadata(joined, "cached_tokens")).isEqualTo("64");
      assertNoLeak(s);
    }
  }

  /**
   * {@code classification.trust_id_header: true} gives up the binding for header-settled exchanges: Envoy
   * sends their bodies nowhere (one round trip per chunk saved), and a forged context leg under the
   * victim's {@code x-disagg-request-id}, answered after the victim's own, wins. That is why it is off
   * by default and documented as safe only behind an edge that strips {@code x-disagg-*}.
   */
  @Test
  void trustingTheIdHeaderSkipsTheBodyAndGivesUpTheBinding() throws Exception {
    Config d = config(64 * 1024 * 1024);
    Config.Classification c = d.classification();
    Config trusting = new Config(d.grpc(), d.admin(),
        new Config.Classification(c.contextClusters(), c.generationClusters(), c.paths(), c.stripAcceptEncoding(), true,
            c.phaseHeader()),
        d.ordering(), d.store(), d.metadata(), d.limits(), d.metrics(), d.logging(), d.shutdown(),
        d.streaming(), d.edgeGuard());
    String victim = "victim-flow-2";
    String prompt = "Victim's long document";
    try (ServiceUnderTest s = new ServiceUnderTest(trusting)) {
      ExchangeResult stored = Flows.run(s.envoy,
          leg("x-disagg-request-id", victim, prompt, true, Wire.usage(450, 1, 384L)).requestHeader("x-disagg-phase", "context"));
      assertClean(stored);
      assertThat(stored.messagesSent()).as("no request body message").noneMatch(m -> m.hasRequestBody());
      assertClean(Flows.run(s.envoy,
          leg("x-disagg-request-id", victim, "hi", true, Wire.usage(3, 1, 0L)).requestHeader("x-disagg-phase", "context")));
      ExchangeResult gen = Flows.run(s.envoy,
          leg("x-disagg-request-id", victim, prompt, false, Wire.usage(450, 12, 450L)).requestHeader("x-disagg-phase", "generation"));

      assertThat(outcome(gen)).isEqualTo("rewritten");
      assertThat(metadata(gen, "prompt_tokens")).as("the forged leg's, by design of the opt-in").isEqualTo("3");
    }
  }

  /** A store whose every put is bound to a fingerprint no leg has: as if each context leg had another prompt. */
  static final class AnotherPromptsStore extends ForwardingStore {
    static final PromptFingerprint FOREIGN = new PromptFingerprint(0x5eed5eed5eed5eedL, 0x0badc0de0badc0deL);

    AnotherPromptsStore(ContextUsageStore real) {
      super(real);
    }

    @Override
    public CompletableFuture<Void> put(List<CorrelationKey> keys, PromptFingerprint fingerprint, ContextUsage usage) {
      return real.put(keys, FOREIGN, usage);
    }
  }

  static ServiceUnderTest serviceWhoseContextsBelongToAnotherPrompt() throws Exception {
    return new ServiceUnderTest(
        config(64 * 1024 * 1024),
        ServiceUnderTest.Transport.IN_PROCESS,
        EnvoyProfile.V1_37,
        (config, timer) -> new AnotherPromptsStore(ServiceUnderTest.MEMORY_STORE.open(config, timer)),
        ExtProcService::new);
  }

  @Test
  void aKeyHoldingOnlyAnotherFlowsUsageIsAMismatchWarnedAboutByItsSourceOnly() throws Exception {
    String genBody = Wire.chatCompletion("gen", Wire.usage(120, 9, 120L));
    try (ServiceUnderTest s = serviceWhoseContextsBelongToAnotherPrompt()) {
      assertClean(Flows.run(s.envoy, leg("x-request-id", KEY, PROMPT_B, true, Wire.usage(610, 1, 0L))));
      ExchangeResult gen = Flows.run(s.envoy, leg("x-request-id", KEY, PROMPT_A, false, Wire.usage(120, 9, 120L)));

      assertClean(gen);
      assertThat(gen.clientResponse().bodyUtf8()).as("passed through as the worker wrote it").isEqualTo(genBody);
      assertThat(outcome(gen)).isEqualTo("fingerprint_mismatch");
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.FINGERPRINT_MISMATCH)).isEqualTo(1);
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.PASSTHROUGH_NO_CONTEXT)).isZero();
      List<String> lines = warnings.list.stream().map(ILoggingEvent::getFormattedMessage).toList();
      assertThat(lines).anySatisfy(line -> assertThat(line).contains("x-request-id key").contains("another prompt"));
      assertThat(lines).noneSatisfy(line -> assertThat(line).containsAnyOf(KEY, "Tenant", "capital"));
    }
  }

  @Test
  void aWaitThatSawOnlyAnotherFlowsUsageEndsAsAMismatchNotATimeout() throws Exception {
    String stream = Wire.chatStream(Wire.usage(120, 4, 120L), "Par", "is");
    try (ServiceUnderTest s = serviceWhoseContextsBelongToAnotherPrompt()) {
      ExchangeResult[] r =
          Flows.generationFirst(
              s.envoy,
              leg("x-request-id", KEY, PROMPT_B, true, Wire.usage(610, 1, 0L)),
              leg("x-request-id", KEY, PROMPT_A, false, "text/event-stream", stream)
                  .requestHeader("x-disagg-order", "concurrent"));

      assertClean(r[0]);
      assertClean(r[1]);
      assertThat(r[1].clientResponse().bodyUtf8()).isEqualTo(stream);
      assertThat(outcome(r[1])).isEqualTo("fingerprint_mismatch");
      s.awaitStreamsEnded();
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.FINGERPRINT_MISMATCH)).as("counted").isEqualTo(1);
      assertThat(s.metrics.exchangeCount(Phase.GENERATION, Outcome.CONTEXT_TIMEOUT)).isZero();
      assertThat(s.store.waiters()).as("no waiter left").isZero();
    }
  }
}
