package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.driver.EnvoyStream;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.emulator.envoy.FakeEnvoy;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.testkit.ScenarioVectors.Leg;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.UnaryOperator;

/**
 * Every exchange the scenario drivers ran during one test of the specification: what {@link ExchangeInvariants}
 * checks after each test. The drivers record here themselves ({@link Flows} for the fake Envoy, {@link
 * VectorRunner} for the direct one), so a test cannot run an exchange the checker does not see.
 * Static because the drivers are; JUnit runs this module's tests one at a time.
 */
final class ExchangeLedger {
  /**
   * One leg as the client and the worker saw it.
   *
   * @param metrics the metrics of the service that handled it, null where its driver was never {@link #serve registered}
   * @param complete false where the client did not get the whole response (a reset, a local reply)
   * @param requestRewritten the worker got another request than the client sent ({@code
   *     streaming.inject_include_usage}): its usage event is not the client's
   */
  record Entry(
      String name, String contentType, byte[] workerBody, byte[] clientBody, boolean complete,
      boolean requestRewritten, UnaryOperator<String> metadata, Metrics metrics) {}

  private static final List<Entry> ENTRIES = new ArrayList<>();
  /**
   * Open while a test of the specification runs: outside it (the property and soak tests run
   * many thousands of flows) nothing is kept.
   */
  private static boolean open;
  /** Which service's metrics each driver's exchanges land in. */
  private static final Map<Object, Metrics> SERVED_BY = new IdentityHashMap<>();
  /** Exchanges recorded against each metrics since it was made: how many it must have counted at least. */
  private static final Map<Metrics, Long> RECORDED = new IdentityHashMap<>();

  private ExchangeLedger() {}

  /** {@code driver} (a {@link FakeEnvoy} or a {@link DirectEnvoy}) talks to the service counting in {@code metrics}. */
  static synchronized void serve(Object driver, Metrics metrics) {
    SERVED_BY.put(driver, metrics);
  }

  /**
   * A driver's service is closed. What was recorded against its metrics stays until the test's {@link
   * #close}: a test that closes its own service is checked like one whose fixture does.
   */
  static synchronized void retire(Object driver) {
    SERVED_BY.remove(driver);
  }

  /** One leg through the fake Envoy. */
  static ExchangeResult record(FakeEnvoy envoy, ExchangeResult r) {
    boolean complete = !r.clientResponse().reset() && r.clientResponse().localReply().isEmpty();
    add(new Entry(
        java.util.Objects.requireNonNullElse(r.exchange().name(), "exchange"),
        r.exchange().responseHeaders().get("content-type").orElse(""),
        r.exchange().responseBody(),
        r.clientResponse().body(),
        complete,
        !java.util.Arrays.equals(r.exchange().requestBody(), r.upstreamRequest().body()),
        key -> LegSeen.of(r).metadata(key),
        metricsOf(envoy)));
    return r;
  }

  /** One leg of a vector through the direct driver. */
  static void record(DirectEnvoy envoy, Leg leg, EnvoyStream s) {
    add(new Entry(
        leg.path(), leg.contentType(), leg.responseBody(), s.clientBody(), s.violation() == null && s.owed() == 0,
        false, key -> s.metadata(LegSeen.NAMESPACE, key), metricsOf(envoy)));
  }

  private static synchronized Metrics metricsOf(Object driver) {
    return SERVED_BY.get(driver);
  }

  private static synchronized void add(Entry e) {
    if (!open) {
      return;
    }
    ENTRIES.add(e);
    if (e.metrics() != null) {
      RECORDED.merge(e.metrics(), 1L, Long::sum);
    }
  }

  /** Starts recording: what ran before (a {@code @BeforeAll}, an earlier test) is dropped. */
  static synchronized void open() {
    ENTRIES.clear();
    open = true;
  }

  /**
   * What a test ran: its exchanges, and for each service's metrics how many exchanges were run against
   * it since the service was made (the metrics count from then on too).
   */
  record Recorded(List<Entry> entries, Map<Metrics, Long> perMetrics) {}

  /** Stops recording: what was recorded since {@link #open}. Services closed meanwhile are forgotten. */
  static synchronized Recorded close() {
    open = false;
    Recorded r = new Recorded(List.copyOf(ENTRIES), new IdentityHashMap<>(RECORDED));
    ENTRIES.clear();
    RECORDED.keySet().removeIf(m -> !SERVED_BY.containsValue(m));
    return r;
  }
}
