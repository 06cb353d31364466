package io.disaggusage.extproc.stream;

import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.classic.spi.IThrowableProxy;
import ch.qos.logback.classic.spi.StackTraceElementProxy;
import ch.qos.logback.core.read.ListAppender;
import io.disaggusage.extproc.rewrite.ContextObserver;
import io.disaggusage.extproc.rewrite.ResponseBodyProcessor;
import io.disaggusage.extproc.rewrite.GenerationRewriter;
import io.disaggusage.extproc.scenario.Flows;
import io.disaggusage.extproc.scenario.ServiceUnderTest;
import io.disaggusage.extproc.testkit.Wire;
import io.disaggusage.extproc.store.ContextUsageStore;
import io.disaggusage.extproc.store.FailingStore;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.EnvoyProfile;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/**
 * What the service logs about exchanges, captured at DEBUG on the root logger while real scenarios run
 * through the fake Envoy: one summary line per exchange with its outcome and numbers, rate-limited
 * warnings, and never a byte of a prompt or a completion (behaviour.md §6), not even when an exception
 * message or a store error quotes one.
 */
class ExchangeLogTest {
  static final String PROMPT = "PROMPT-SECRET-7f3a";
  static final String COMPLETION = "COMPLETION-SECRET-9c1e";
  static final String PATH = "/v1/chat/completions";

  private final LoggerContext context = (LoggerContext) LoggerFactory.getILoggerFactory();
  private final Logger root = context.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
  private final ListAppender<ILoggingEvent> events = new ListAppender<>();
  private Level rootLevel;

  @BeforeEach
  void capture() {
    rootLevel = root.getLevel();
    root.setLevel(Level.DEBUG);
    events.setContext(context);
    events.start();
    root.addAppender(events);
  }

  @AfterEach
  void release() {
    root.detachAppender(events);
    events.stop();
    root.setLevel(rootLevel);
  }

  static String request(String model, boolean context) {
    return "{\"model\":\"" + model + "\",\"messages\":[{\"role\":\"system\",\"content\":\"You are terse.\"},"
        + "{\"role\":\"user\",\"content\":\"" + PROMPT + ": what is the capital of France?\"}],"
        + "\"max_tokens\":32,\"kv_transfer_params\":{\""
        + (context ? "do_remote_decode" : "do_remote_prefill")
        + "\":true}}";
  }

  static String completion(String id, String usage) {
    return Wire.chatCompletion(id, usage).replace("Paris is the capital.", COMPLETION + " Paris.");
  }

  static Exchange.Builder call(String id, String requestBody, String contentType, String responseBody) {
    return Exchange.post(PATH, requestBody)
        .requestHeader("x-request-id", id)
        .responseHeader("content-type", contentType)
        .responseBody(responseBody)
        .responseChunking(Chunking.fixed(29));
  }

  static Exchange.Builder contextCall(String id) {
    return call(id, request(Wire.MODEL, true), "application/json", completion("ctx-" + id, Wire.usage(50, 1, 10L)));
  }

  @Test
  void everyExchangeGetsOneSummaryLineAndNoLogLineCarriesPromptOrCompletionText() throws Exception {
    String genJson = completion("gen", Wire.usage(50, 4, 50L));
    String genStream = Wire.chatStream(Wire.usage(50, 3, 50L), COMPLETION, " Paris");
    String broken = genJson.substring(0, genJson.length() - 3);
    // JSON-escaped in the request body: the model name the service reads contains CR LF.
    String evilModel = "evil\\r\\n2026-01-01T00:00:00.000Z ERROR forged " + "m".repeat(100);
    String longKey = "k".repeat(200);
    List<ExchangeResult> results = new ArrayList<>();
    try (ServiceUnderTest s = new ServiceUnderTest(ServiceUnderTest.testConfig())) {
      results.add(Flows.run(s.envoy, contextCall("log-json")));
      results.add(Flows.run(s.envoy, call("log-json", request(Wire.MODEL, false), "application/json", genJson)));
      results.add(Flows.run(s.envoy, contextCall("log-sse")));
      results.add(Flows.run(s.envoy, call("log-sse", request(Wire.MODEL, false), "text/event-stream", genStream)));
      results.add(Flows.run(s.envoy, contextCall("log-malformed")));
      results.add(
          Flows.run(s.envoy, call("log-malformed", request(Wire.MODEL, false), "application/json", broken)));
      results.add(Flows.run(s.envoy, call("log-orphan", request(Wire.MODEL, false), "application/json", genJson)));
      results.add(
          Flows.run(
              s.envoy,
              call(
                  "log-plain",
                  "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"" + PROMPT + "\"}]}",
                  "application/json",
                  genJson)));
      results.add(
          Flows.run(
              s.envoy,
              call(longKey, request(evilModel, true), "application/json", completion("x", Wire.usage(7, 1, 0L)))));
    }
    results.forEach(Flows::assertClean);

    assertNoSecrets();
    List<Map<String, String>> summaries = summaries();
    assertThat(summaries).hasSize(results.size());

    assertThat(summaryFor(summaries, "xrid:log-json", "context")).containsAllEntriesOf(fields(
        "outcome=stored", "model=" + Wire.MODEL, "prompt=50", "cached=10", "completion=-", "corrected=false",
        "bytes_in=" + bytes(results.get(0).exchange().responseBody()), "bytes_out=" + bytes(results.get(0).clientResponse().body())));
    assertThat(summaryFor(summaries, "xrid:log-json", "generation")).containsAllEntriesOf(fields(
        "outcome=rewritten", "model=" + Wire.MODEL, "prompt=50", "cached=10", "reported_cached=50", "completion=4", "total=54",
        "corrected=true", "bytes_in=" + genJson.length(), "bytes_out=" + bytes(results.get(1).clientResponse().body())));
    assertThat(summaryFor(summaries, "xrid:log-sse", "generation"))
        .containsEntry("outcome", "rewritten")
        .containsEntry("completion", "3")
        .containsEntry("total", "53")
        .containsEntry("corrected", "true")
        .containsEntry("bytes_in", Integer.toString(genStream.length()));
    assertThat(summaryFor(summaries, "xrid:log-malformed", "generation"))
        .containsEntry("outcome", "parse_error")
        .containsEntry("corrected", "false")
        .containsEntry("bytes_in", Integer.toString(broken.length()))
        .containsEntry("bytes_out", Integer.toString(broken.length()));
    assertThat(summaryFor(summaries, "xrid:log-orphan", "generation"))
        .containsEntry("outcome", "passthrough_no_context")
        .containsEntry("prompt", "50")
        .containsEntry("reported_cached", "50")
        .containsEntry("corrected", "false")
        .containsEntry("bytes_in", Integer.toString(genJson.length()))
        .containsEntry("bytes_out", Integer.toString(genJson.length()));
    assertThat(summaryFor(summaries, "-", "none")).containsEntry("outcome", "not_disaggregated");

    // Client-supplied text is bounded: no line breaks, at most 64 characters.
    Map<String, String> bounded = summaries.get(summaries.size() - 1);
    assertThat(bounded).containsEntry("phase", "context").containsEntry("outcome", "stored");
    assertThat(bounded.get("key")).isEqualTo("xrid:" + "k".repeat(61) + "...");
    assertThat(bounded.get("model"))
        .hasSize(64)
        .startsWith("evil??2026-01-01T00:00:00.000Z?ERROR?forged?mmm")
        .endsWith("...");
    for (ILoggingEvent event : captured()) {
      assertThat(event.getFormattedMessage()).doesNotContain("\n", "\r");
    }
    for (Map<String, String> summary : summaries) {
      assertThat(Long.parseLong(summary.get("duration_ms"))).isNotNegative();
    }
  }

  /**
   * A generation processor whose exception message quotes the chunk it choked on. It takes the chunk
   * first (as a real processor holds what it was given), so the fail-open path can give it back.
   */
  static final class QuotingFailure extends DelegatingProcessor {
    QuotingFailure(GenerationRewriter delegate) {
      super(delegate);
    }

    @Override
    public void accept(byte[] chunk) {
      delegate.accept(chunk);
      String text = new String(chunk, StandardCharsets.UTF_8);
      if (text.contains("SECRET")) {
        throw new IllegalStateException("unexpected token near: " + text, new RuntimeException(text));
      }
    }
  }

  @Test
  void internalErrorsAreSummarisedAndWarnedOncePerIntervalWithoutTheExceptionMessage() throws Exception {
    String genStream = Wire.chatStream(Wire.usage(50, 3, 50L), "Par", COMPLETION, "is");
    List<ExchangeResult> gens = new ArrayList<>();
    try (ServiceUnderTest s =
        new ServiceUnderTest(
            ServiceUnderTest.testConfig(),
            ServiceUnderTest.Transport.IN_PROCESS,
            EnvoyProfile.V1_37,
            FailOpenTest.withProcessors(QuotingFailure::new))) {
      for (String id : List.of("boom-1", "boom-2", "boom-3")) {
        Flows.run(s.envoy, contextCall(id));
        gens.add(Flows.run(s.envoy, call(id, request(Wire.MODEL, false), "text/event-stream", genStream)));
      }
    }
    for (ExchangeResult gen : gens) {
      assertClean(gen);
      assertThat(gen.clientResponse().bodyUtf8()).isEqualTo(genStream);
    }

    assertNoSecrets();
    List<Map<String, String>> summaries = summaries();
    for (String id : List.of("boom-1", "boom-2", "boom-3")) {
      assertThat(summaryFor(summaries, "xrid:" + id, "generation"))
          .containsEntry("outcome", "error")
          .containsEntry("corrected", "false");
    }
    // Three failures within the interval: one warning, naming the class and the failing frame.
    List<ILoggingEvent> warnings = warnings();
    assertThat(warnings).hasSize(1);
    assertThat(warnings.get(0).getFormattedMessage())
        .startsWith("exchange let through unmodified after an internal error: java.lang.IllegalStateException at ")
        .contains(QuotingFailure.class.getName() + ".accept(");
    assertThat(warnings.get(0).getThrowableProxy()).isNull();
  }

  @Test
  void storeFailuresAreWarnedWithTheExceptionClassOnly() throws Exception {
    UnaryOperator<ContextUsageStore> broken =
        real ->
            FailingStore.failing(
                real,
                () -> new IllegalStateException("cannot store " + PROMPT),
                () -> new IllegalArgumentException("lookup " + COMPLETION),
                () -> new IllegalArgumentException("await " + COMPLETION));
    try (ServiceUnderTest s =
        new ServiceUnderTest(
            ServiceUnderTest.testConfig(),
            ServiceUnderTest.Transport.IN_PROCESS,
            EnvoyProfile.V1_37,
            FailOpenTest.withStore(broken))) {
      assertClean(Flows.run(s.envoy, contextCall("store-down")));
      assertClean(
          Flows.run(
              s.envoy,
              call("store-down", request(Wire.MODEL, false), "application/json", completion("g", Wire.usage(50, 4, 50L)))));
    }

    assertNoSecrets();
    List<Map<String, String>> summaries = summaries();
    assertThat(summaryFor(summaries, "xrid:store-down", "context")).containsEntry("outcome", "error");
    assertThat(summaryFor(summaries, "xrid:store-down", "generation")).containsEntry("outcome", "error");
    assertThat(warnings())
        .extracting(ILoggingEvent::getFormattedMessage)
        .containsExactly(
            "context usage not stored, its generation exchange will pass through: store failed with"
                + " java.lang.IllegalStateException",
            "context usage lookup failed, generation exchange passed through: store failed with"
                + " java.lang.IllegalArgumentException");
  }

  @Test
  void atInfoNoSummaryIsWritten() throws Exception {
    root.setLevel(Level.INFO);
    try (ServiceUnderTest s = new ServiceUnderTest(ServiceUnderTest.testConfig())) {
      assertClean(Flows.run(s.envoy, contextCall("quiet")));
    }
    assertThat(summaries()).isEmpty();
  }

  // ---------------------------------------------------------------------------------------------

  /** A snapshot of the captured events; exchanges may still be logging from other threads. */
  private List<ILoggingEvent> captured() {
    synchronized (events) { // logback appends under the appender's own lock
      return List.copyOf(events.list);
    }
  }

  private List<ILoggingEvent> warnings() {
    return captured().stream()
        .filter(e -> e.getLevel() == Level.WARN && e.getLoggerName().equals(ExchangeStream.class.getName()))
        .toList();
  }

  /** The summary lines, each as its {@code name=value} fields in order. */
  private List<Map<String, String>> summaries() {
    List<Map<String, String>> out = new ArrayList<>();
    for (ILoggingEvent event : captured()) {
      if (!event.getLoggerName().equals(ExchangeStream.SUMMARY_LOGGER)) {
        continue;
      }
      assertThat(event.getLevel()).isEqualTo(Level.DEBUG);
      String message = event.getFormattedMessage();
      assertThat(message).startsWith("exchange ");
      Map<String, String> fields = new LinkedHashMap<>();
      for (String part : message.substring("exchange ".length()).split(" ")) {
        int eq = part.indexOf('=');
        fields.put(part.substring(0, eq), part.substring(eq + 1));
      }
      assertThat(fields.keySet())
          .containsExactly(
              "phase", "outcome", "key", "model", "prompt", "cached", "reported_cached", "completion", "total",
              "corrected", "refused", "bytes_in", "bytes_out", "duration_ms");
      out.add(fields);
    }
    return out;
  }

  /** The summary fields {@code key=value} (the value may hold '='), in order. */
  private static Map<String, String> fields(String... keyValues) {
    Map<String, String> fields = new LinkedHashMap<>();
    for (String kv : keyValues) {
      int eq = kv.indexOf('=');
      fields.put(kv.substring(0, eq), kv.substring(eq + 1));
    }
    return fields;
  }

  private static Map<String, String> summaryFor(List<Map<String, String>> summaries, String key, String phase) {
    List<Map<String, String>> matching =
        summaries.stream().filter(m -> m.get("key").equals(key) && m.get("phase").equals(phase)).toList();
    assertThat(matching).as("summary lines for %s %s in %s", phase, key, summaries).hasSize(1);
    return matching.get(0);
  }

  private static String bytes(byte[] body) {
    return Integer.toString(body.length);
  }

  /** No part of any captured event (message, arguments, MDC, key-values, exception) quotes a body. */
  private void assertNoSecrets() {
    assertThat(captured()).isNotEmpty();
    for (ILoggingEvent event : captured()) {
      List<String> parts = new ArrayList<>();
      parts.add(event.getMessage());
      parts.add(event.getFormattedMessage());
      if (event.getArgumentArray() != null) {
        for (Object argument : event.getArgumentArray()) {
          parts.add(String.valueOf(argument));
        }
      }
      parts.add(String.valueOf(event.getMDCPropertyMap()));
      parts.add(String.valueOf(event.getKeyValuePairs()));
      for (IThrowableProxy t = event.getThrowableProxy(); t != null; t = t.getCause()) {
        parts.add(t.getClassName());
        parts.add(t.getMessage());
        for (StackTraceElementProxy frame : t.getStackTraceElementProxyArray()) {
          parts.add(frame.getSTEAsString());
        }
        for (IThrowableProxy suppressed : t.getSuppressed()) {
          parts.add(suppressed.getMessage());
        }
      }
      for (String part : parts) {
        assertThat(String.valueOf(part))
            .as("log event %s", event)
            .doesNotContain(PROMPT, COMPLETION, "SECRET", "capital of France");
      }
    }
  }
}
