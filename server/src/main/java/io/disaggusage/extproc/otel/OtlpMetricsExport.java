package io.disaggusage.extproc.otel;

import io.disaggusage.extproc.Version;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.metrics.ExchangeMeter;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.usage.UsageFigures;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.metrics.LongCounter;
import io.opentelemetry.api.metrics.LongHistogram;
import io.opentelemetry.api.metrics.Meter;
import io.opentelemetry.exporter.otlp.http.metrics.OtlpHttpMetricExporter;
import io.opentelemetry.exporter.otlp.http.metrics.OtlpHttpMetricExporterBuilder;
import io.opentelemetry.sdk.common.CompletableResultCode;
import io.opentelemetry.sdk.metrics.SdkMeterProvider;
import io.opentelemetry.sdk.metrics.export.PeriodicMetricReader;
import io.opentelemetry.sdk.resources.Resource;
import java.math.BigInteger;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

/**
 * The service's usage as OpenTelemetry metrics with the GenAI names, pushed over OTLP/HTTP (protobuf)
 * every {@code metrics.otlp.interval} by the OpenTelemetry SDK's periodic reader, on its own thread: a
 * slow or absent collector costs a failed push and a log line, never an exchange.
 *
 * <ul>
 *   <li>{@code gen_ai.client.token.usage} (histogram, {@code {token}}) — one observation per token type
 *       of each generation response: {@code gen_ai.token.type} {@code input} (prompt tokens the client
 *       received), {@code cached_input} (cached tokens the client received, corrected), {@code output}
 *       (completion tokens), and {@value #REPORTED_CACHED_INPUT} (what the generation worker itself
 *       reported as cached); with {@code gen_ai.request.model} (bounded as the Prometheus {@code model}
 *       label is) and {@value #OUTCOME_KEY}.
 *   <li>{@code disagg_usage.exchanges} (counter) — exchanges by {@value #PHASE_KEY} and {@value #OUTCOME_KEY},
 *       the Prometheus {@code disagg_usage_exchanges_total}.
 * </ul>
 *
 * <p>Resource: {@code service.name} {@value #SERVICE_NAME}, {@code service.version}, and a
 * {@code service.instance.id} per process, so replicas' series stay apart.
 */
public final class OtlpMetricsExport implements ExchangeMeter, AutoCloseable {
  static final String SERVICE_NAME = "disagg-usage-extproc";
  /** Our {@code gen_ai.token.type} value for the generation worker's own cached count. */
  static final String REPORTED_CACHED_INPUT = "disagg_usage.reported_cached_input";
  static final String OUTCOME_KEY = "disagg_usage.outcome";
  static final String PHASE_KEY = "disagg_usage.phase";

  static final AttributeKey<String> TOKEN_TYPE = AttributeKey.stringKey("gen_ai.token.type");
  static final AttributeKey<String> REQUEST_MODEL = AttributeKey.stringKey("gen_ai.request.model");
  static final AttributeKey<String> OUTCOME = AttributeKey.stringKey(OUTCOME_KEY);
  static final AttributeKey<String> PHASE = AttributeKey.stringKey(PHASE_KEY);
  /** The GenAI conventions' advice for {@code gen_ai.client.token.usage}: powers of 4 from 1 to 4^13. */
  static final List<Long> TOKEN_BUCKETS = List.of(1L, 4L, 16L, 64L, 256L, 1024L, 4096L, 16384L, 65536L, 262144L,
      1048576L, 4194304L, 16777216L, 67108864L);

  private final SdkMeterProvider provider;
  private final LongHistogram tokenUsage;
  private final LongCounter exchanges;

  private OtlpMetricsExport(SdkMeterProvider provider) {
    this.provider = provider;
    Meter meter = provider.get("io.disaggusage.extproc");
    this.tokenUsage = meter.histogramBuilder("gen_ai.client.token.usage")
        .setDescription("Tokens of each generation response the client received, by token type (corrected), and"
            + " the generation worker's own cached count (" + REPORTED_CACHED_INPUT + ")")
        .setUnit("{token}")
        .ofLongs()
        .setExplicitBucketBoundariesAdvice(TOKEN_BUCKETS)
        .build();
    this.exchanges = meter.counterBuilder("disagg_usage.exchanges")
        .setDescription("HTTP exchanges seen through ext_proc, by phase and outcome")
        .setUnit("{exchange}")
        .build();
  }

  /** Starts pushing to {@code config.endpoint()}; the first push is one interval from now. */
  public static OtlpMetricsExport start(Config.Otlp config) {
    OtlpHttpMetricExporterBuilder exporter = OtlpHttpMetricExporter.builder()
        .setEndpoint(metricsUrl(config.endpoint()))
        .setTimeout(config.timeout().toNanos(), TimeUnit.NANOSECONDS);
    for (String header : config.headers()) {
      int eq = header.indexOf('=');
      exporter.addHeader(header.substring(0, eq).trim(), header.substring(eq + 1).trim());
    }
    Resource resource = Resource.getDefault().merge(Resource.create(Attributes.of(
        AttributeKey.stringKey("service.name"), SERVICE_NAME,
        AttributeKey.stringKey("service.version"), Version.current(),
        AttributeKey.stringKey("service.instance.id"), UUID.randomUUID().toString())));
    SdkMeterProvider provider = SdkMeterProvider.builder()
        .setResource(resource)
        .registerMetricReader(PeriodicMetricReader.builder(exporter.build())
            .setInterval(config.interval().toNanos(), TimeUnit.NANOSECONDS)
            .build())
        .build();
    return new OtlpMetricsExport(provider);
  }

  /** The OTLP/HTTP metrics URL of a collector's base URL (a trailing slash allowed). */
  static String metricsUrl(String endpoint) {
    String base = endpoint.endsWith("/") ? endpoint.substring(0, endpoint.length() - 1) : endpoint;
    return base.endsWith("/v1/metrics") ? base : base + "/v1/metrics";
  }

  @Override
  public void exchange(Phase phase, Outcome outcome) {
    exchanges.add(1, Attributes.of(PHASE, phase.label(), OUTCOME, outcome.label()));
  }

  @Override
  public void generation(String modelLabel, UsageFigures figures, Outcome outcome) {
    record("input", figures.prompt(), modelLabel, outcome);
    record("cached_input", figures.cached(), modelLabel, outcome);
    record("output", figures.completion(), modelLabel, outcome);
    record(REPORTED_CACHED_INPUT, figures.reportedCached(), modelLabel, outcome);
  }

  private void record(String type, BigInteger tokens, String modelLabel, Outcome outcome) {
    if (tokens != null && tokens.signum() >= 0 && tokens.bitLength() < 64) {
      tokenUsage.record(tokens.longValue(),
          Attributes.of(TOKEN_TYPE, type, REQUEST_MODEL, modelLabel, OUTCOME, outcome.label()));
    }
  }

  /** Pushes what is left, then stops; waits at most {@code timeoutMillis}. */
  public void close(long timeoutMillis) {
    CompletableResultCode done = provider.shutdown();
    done.join(timeoutMillis, TimeUnit.MILLISECONDS);
  }

  @Override
  public void close() {
    close(TimeUnit.SECONDS.toMillis(5));
  }
}
