package io.disaggusage.extproc.metrics;

import io.disaggusage.extproc.Version;
import io.disaggusage.extproc.classify.RefusedInput;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.inject.InjectionOutcome;
import io.disaggusage.extproc.inject.UsageRemoval;
import io.disaggusage.extproc.usage.UsageFigures;
import io.prometheus.metrics.core.datapoints.DistributionDataPoint;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.Gauge;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.core.metrics.Info;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.math.BigInteger;
import java.util.function.BooleanSupplier;
import java.util.function.LongSupplier;

/**
 * The service's Prometheus metrics, all named {@code disagg_usage_*}. Label values come from enums or
 * from {@link ModelLabels}, so cardinality is bounded. The true and the reported prefix-cache hit ratio
 * per model are one PromQL division each:
 *
 * <pre>
 *   sum by (model) (rate(disagg_usage_tokens_total{kind="cached"}[5m]))
 *     / sum by (model) (rate(disagg_usage_tokens_total{kind="prompt"}[5m]))
 *   sum by (model) (rate(disagg_usage_tokens_total{kind="cached_reported"}[5m]))
 *     / sum by (model) (rate(disagg_usage_tokens_total{kind="prompt"}[5m]))
 * </pre>
 */
public final class Metrics {
  /** Which Envoy message a processing-latency observation is for. */
  public enum Message {
    REQUEST_HEADERS("request_headers"),
    REQUEST_BODY("request_body"),
    RESPONSE_HEADERS("response_headers"),
    RESPONSE_BODY("response_body"),
    OTHER("other");

    final String label;

    Message(String label) {
      this.label = label;
    }
  }

  /** A store operation, for error counting. */
  public enum StoreOperation {
    PUT("put"),
    TAKE("take"),
    AWAIT("await");

    final String label;

    StoreOperation(String label) {
      this.label = label;
    }
  }

  private final PrometheusRegistry registry;
  private final ModelLabels models;
  private final Counter exchanges;
  private final Counter tokens;
  private final Gauge activeStreams;
  private final Histogram contextWait;
  private final Histogram processing;
  /** The label lookup done once: it allocates a key per call otherwise. */
  private final java.util.EnumMap<Message, DistributionDataPoint> processingByMessage =
      new java.util.EnumMap<>(Message.class);
  private final Counter storeErrors;
  private final Counter waitsRefused;
  private final Counter injections;
  private final Counter injectedUsageEvents;
  private final Counter refusedInputs;
  /** Where exchanges and token figures go besides the registry; set once at start-up. */
  private volatile ExchangeMeter alsoTo = ExchangeMeter.NONE;

  public Metrics(PrometheusRegistry registry, Config.Metrics config) {
    this.registry = registry;
    this.models = new ModelLabels(config);
    // exposed as disagg_usage_build_info (an info metric: the client adds the suffix)
    Info.builder()
        .name("disagg_usage_build")
        .help("Always 1; the labels say which build and Java runtime serve (join on them in PromQL)")
        .labelNames("version", "java_version")
        .register(registry)
        .setLabelValues(Version.current(), Runtime.version().toString());
    this.exchanges =
        Counter.builder()
            .name("disagg_usage_exchanges_total")
            .help("HTTP exchanges seen through ext_proc, by phase and outcome")
            .labelNames("phase", "outcome")
            .register(registry);
    this.tokens =
        Counter.builder()
            .name("disagg_usage_tokens_total")
            .help(
                "Tokens in generation responses by model and kind: prompt, cached (as emitted to the"
                    + " client, corrected), cached_reported (what the generation worker said), completion")
            .labelNames("model", "kind")
            .register(registry);
    this.activeStreams =
        Gauge.builder()
            .name("disagg_usage_active_streams")
            .help("ext_proc streams currently open")
            .register(registry);
    this.contextWait =
        Histogram.builder()
            .name("disagg_usage_context_wait_seconds")
            .help("Time generation exchanges waited for their context usage")
            .classicUpperBounds(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10)
            .register(registry);
    this.processing =
        Histogram.builder()
            .name("disagg_usage_message_processing_seconds")
            .help("Time spent handling one Envoy message, excluding asynchronous waits")
            .labelNames("message")
            .classicOnly() // observed on every message: native buckets would double the cost
            .classicUpperBounds(0.00001, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05)
            .register(registry);
    for (Message message : Message.values()) {
      processingByMessage.put(message, processing.labelValues(message.label));
    }
    this.storeErrors =
        Counter.builder()
            .name("disagg_usage_store_errors_total")
            .help("Context-usage store operations that failed (traffic passed through)")
            .labelNames("operation")
            .register(registry);
    this.waitsRefused =
        Counter.builder()
            .name("disagg_usage_context_waits_refused_total")
            .help(
                "Generation exchanges that did not wait for their context usage because limits.max_waiters"
                    + " exchanges already waited (usage passed through, outcome context_timeout)")
            .register(registry);
    this.injections =
        Counter.builder()
            .name("disagg_usage_include_usage_injections_total")
            .help(
                "Request bodies on handled paths seen with streaming.inject_include_usage on, by what was"
                    + " done: injected, or why not")
            .labelNames("outcome")
            .register(registry);
    this.injectedUsageEvents =
        Counter.builder()
            .name("disagg_usage_injected_usage_events_total")
            .help(
                "Exchanges whose request the service made ask for usage, by what became of the resulting"
                    + " usage event: removed, absent (none came), leaked (the client received it)")
            .labelNames("result")
            .register(registry);
    this.refusedInputs =
        Counter.builder()
            .name("disagg_usage_refused_inputs_total")
            .help(
                "Request inputs a client can forge that the classifier did not follow (contradicted by the"
                    + " cluster or a body marker, or not allowed to decide), by input and the phase decided")
            .labelNames("input", "phase")
            .register(registry);
    startAtZero(config);
  }

  /**
   * Every series whose label values are known in advance exists from start-up at 0, so a dashboard's rate
   * and an absence alert ({@code absent(...)}) work before the first exchange: each phase and outcome,
   * store operation, injection outcome and removal result, and the tokens of each allow-listed model
   * (and {@code other}) by kind. Models seen only at run time appear when first counted.
   */
  private void startAtZero(Config.Metrics config) {
    for (Phase phase : Phase.values()) {
      for (Outcome outcome : Outcome.values()) {
        exchanges.labelValues(phase.label(), outcome.label());
      }
    }
    for (StoreOperation operation : StoreOperation.values()) {
      storeErrors.labelValues(operation.label);
    }
    for (InjectionOutcome outcome : InjectionOutcome.values()) {
      injections.labelValues(outcome.label());
    }
    for (UsageRemoval result : UsageRemoval.values()) {
      injectedUsageEvents.labelValues(result.label());
    }
    for (RefusedInput input : RefusedInput.values()) {
      for (Phase phase : Phase.values()) {
        refusedInputs.labelValues(input.label(), phase.label());
      }
    }
    if (!config.models().isEmpty()) {
      java.util.List<String> labels = new java.util.ArrayList<>(config.models());
      labels.add(ModelLabels.OTHER);
      for (String model : labels) {
        for (String kind : TOKEN_KINDS) {
          tokens.labelValues(model, kind);
        }
      }
    }
  }

  /** The {@code kind} label values of {@code disagg_usage_tokens_total}. */
  static final java.util.List<String> TOKEN_KINDS = java.util.List.of("prompt", "cached", "cached_reported", "completion");

  /** A fresh registry with this service's metrics only; for tests and embedded use. */
  public static Metrics standalone() {
    return new Metrics(new PrometheusRegistry(), Config.defaults().metrics());
  }

  public PrometheusRegistry registry() {
    return registry;
  }

  /** Reports every exchange and generation usage to {@code meter} too (the OTLP export). */
  public void alsoTo(ExchangeMeter meter) {
    this.alsoTo = meter;
  }

  public void exchange(Phase phase, Outcome outcome) {
    exchanges.labelValues(phase.label(), outcome.label()).inc();
    alsoTo.exchange(phase, outcome);
  }

  /** Counts the usage a generation response carried to the client, for the exchange's outcome. */
  public void generation(String model, UsageFigures figures, Outcome outcome) {
    if (figures == null) {
      return;
    }
    String label = models.label(model);
    countTokens(label, figures);
    alsoTo.generation(label, figures, outcome);
  }

  /** Current count for one (phase, outcome) pair; for tests and the admin page. */
  public long exchangeCount(Phase phase, Outcome outcome) {
    return (long) exchanges.labelValues(phase.label(), outcome.label()).get();
  }

  /** Counts the usage a generation response carried to the client. */
  public void tokens(String model, UsageFigures figures) {
    if (figures == null) {
      return;
    }
    countTokens(models.label(model), figures);
  }

  private void countTokens(String label, UsageFigures figures) {
    add(label, "prompt", figures.prompt());
    add(label, "cached", figures.cached());
    add(label, "cached_reported", figures.reportedCached());
    add(label, "completion", figures.completion());
  }

  /** Current token count for one (model label, kind); for tests. */
  public long tokenCount(String modelLabel, String kind) {
    return (long) tokens.labelValues(modelLabel, kind).get();
  }

  private void add(String model, String kind, BigInteger value) {
    if (value != null && value.signum() > 0) {
      tokens.labelValues(model, kind).inc(value.doubleValue());
    }
  }

  public void streamOpened() {
    activeStreams.inc();
  }

  public void streamClosed() {
    activeStreams.dec();
  }

  public long activeStreams() {
    return (long) activeStreams.get();
  }

  public void contextWaited(long nanos) {
    contextWait.observe(nanos / 1e9);
  }

  public void processed(Message message, long nanos) {
    processingByMessage.get(message).observe(nanos / 1e9);
  }

  public void waitRefused() {
    waitsRefused.inc();
  }

  public long waitRefusedCount() {
    return (long) waitsRefused.get();
  }

  public void injection(InjectionOutcome outcome) {
    injections.labelValues(outcome.label()).inc();
  }

  public long injectionCount(InjectionOutcome outcome) {
    return (long) injections.labelValues(outcome.label()).get();
  }

  public void injectedUsageEvent(UsageRemoval result) {
    injectedUsageEvents.labelValues(result.label()).inc();
  }

  public long injectedUsageEventCount(UsageRemoval result) {
    return (long) injectedUsageEvents.labelValues(result.label()).get();
  }

  /** Counts each input the classifier refused on one exchange classified as {@code phase}. */
  public void refused(java.util.Set<RefusedInput> inputs, Phase phase) {
    for (RefusedInput input : inputs) {
      refusedInputs.labelValues(input.label(), phase.label()).inc();
    }
  }

  public long refusedCount(RefusedInput input, Phase phase) {
    return (long) refusedInputs.labelValues(input.label(), phase.label()).get();
  }

  public void storeError(StoreOperation operation) {
    storeErrors.labelValues(operation.label).inc();
  }

  public long storeErrorCount(StoreOperation operation) {
    return (long) storeErrors.labelValues(operation.label).get();
  }

  /** Exposes the store's size as {@code disagg_usage_store_entries}. */
  public void registerStoreSize(LongSupplier entries) {
    GaugeWithCallback.builder()
        .name("disagg_usage_store_entries")
        .help("Context usage entries currently held by the store")
        .callback(cb -> cb.call(entries.getAsLong()))
        .register(registry);
  }

  /** Exposes the store's readiness as {@code disagg_usage_store_ready}: 1 ready, 0 not (e.g. Redis down). */
  public void registerStoreReady(BooleanSupplier ready) {
    GaugeWithCallback.builder()
        .name("disagg_usage_store_ready")
        .help("1 while the context-usage store can take puts and lookups, 0 while it cannot (Redis unreachable)")
        .callback(cb -> cb.call(ready.getAsBoolean() ? 1 : 0))
        .register(registry);
  }
}
