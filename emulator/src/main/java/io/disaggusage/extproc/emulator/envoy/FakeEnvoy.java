package io.disaggusage.extproc.emulator.envoy;

import com.google.protobuf.util.Durations;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.grpc.Channel;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A fake Envoy HTTP filter chain with one {@code envoy.filters.http.ext_proc} filter, driving any
 * ext_proc server over a real gRPC {@link Channel}. Configured with the real filter-config proto,
 * a version {@link EnvoyProfile} and real timers; each {@link Exchange} is one HTTP request and
 * gets its own lazily opened {@code Process} stream.
 *
 * <pre>{@code
 * try (FakeEnvoy envoy = FakeEnvoy.builder(channel).config(filterConfig).profile(EnvoyProfile.V1_37).build()) {
 *   ExchangeResult r = envoy.execute(Exchange.post("/v1/chat/completions", json).responseBody(sse).build());
 *   assertThat(r.clientResponse().bodyUtf8()).contains("\"cached_tokens\":0");
 * }
 * }</pre>
 *
 * Not modelled (rejected with {@link UnsupportedOperationException}): observability mode,
 * FULL_DUPLEX_STREAMED, send_body_without_waiting_for_header_response, forward_rules, http_service.
 */
public final class FakeEnvoy implements AutoCloseable {
  /** Envoy's default {@code message_timeout}. */
  public static final Duration DEFAULT_MESSAGE_TIMEOUT = Duration.ofMillis(200);
  /** Envoy's default per-connection buffer limit. */
  public static final int DEFAULT_BUFFER_LIMIT = 1024 * 1024;

  private final Channel channel;
  private final ExternalProcessor config;
  private final EnvoyProfile profile;
  private final ScheduledExecutorService timer;
  private final boolean ownsTimer;
  private final ExecutorService pool;
  private final int bufferLimitBytes;
  private final boolean stripContentLengthOnModeOverride;
  private final int statusOnError;
  private final Duration awaitTimeout;
  private final HeaderMutator mutator;
  private final EnvoyStats stats = new EnvoyStats();
  private final long messageTimeoutMillis;
  private final long maxMessageTimeoutMillis;

  private FakeEnvoy(Builder b) {
    this.channel = b.channel;
    this.config = b.config;
    this.profile = b.profile;
    validate(config);
    this.ownsTimer = b.timer == null;
    this.timer = b.timer != null
        ? b.timer
        : Executors.newSingleThreadScheduledExecutor(daemon("fake-envoy-timer"));
    this.pool = Executors.newCachedThreadPool(daemon("fake-envoy-worker"));
    this.bufferLimitBytes = b.bufferLimitBytes;
    this.stripContentLengthOnModeOverride = b.stripContentLengthOnModeOverride;
    this.statusOnError = b.statusOnError;
    this.awaitTimeout = b.awaitTimeout;
    this.mutator = new HeaderMutator(config.getMutationRules());
    this.messageTimeoutMillis = config.hasMessageTimeout()
        ? Durations.toMillis(config.getMessageTimeout())
        : DEFAULT_MESSAGE_TIMEOUT.toMillis();
    this.maxMessageTimeoutMillis =
        config.hasMaxMessageTimeout() ? Durations.toMillis(config.getMaxMessageTimeout()) : 0;
  }

  public static Builder builder(Channel channel) {
    return new Builder(channel);
  }

  private static void validate(ExternalProcessor c) {
    if (c.getObservabilityMode()) {
      throw new UnsupportedOperationException("FakeEnvoy does not model observability_mode");
    }
    if (c.getSendBodyWithoutWaitingForHeaderResponse()) {
      throw new UnsupportedOperationException(
          "FakeEnvoy does not model send_body_without_waiting_for_header_response");
    }
    if (c.hasForwardRules()) {
      throw new UnsupportedOperationException("FakeEnvoy does not model forward_rules");
    }
    if (c.hasHttpService()) {
      throw new UnsupportedOperationException("FakeEnvoy only models the gRPC transport");
    }
    ProcessingMode m = c.getProcessingMode();
    for (BodySendMode mode : new BodySendMode[] {m.getRequestBodyMode(), m.getResponseBodyMode()}) {
      if (mode == BodySendMode.FULL_DUPLEX_STREAMED) {
        throw new UnsupportedOperationException("FakeEnvoy does not model FULL_DUPLEX_STREAMED");
      }
      if (mode == BodySendMode.UNRECOGNIZED) {
        throw new IllegalArgumentException("unknown body mode in processing_mode");
      }
    }
    if (c.hasMessageTimeout() && Durations.toMillis(c.getMessageTimeout()) > 3_600_000L) {
      throw new IllegalArgumentException("message_timeout above 3600s is rejected by Envoy");
    }
  }

  /** Runs an exchange to completion and returns what happened. */
  public ExchangeResult execute(Exchange exchange) {
    return start(exchange).awaitResult();
  }

  /** Starts an exchange; its messages are sent from the harness's own threads. */
  public ExchangeHandle start(Exchange exchange) {
    Objects.requireNonNull(exchange);
    FilterStream stream = new FilterStream(this, exchange);
    stream.start();
    return new ExchangeHandle(stream, awaitTimeout);
  }

  /** Counters summed over every exchange run by this instance. */
  public EnvoyStats stats() {
    return stats;
  }

  public ExternalProcessor config() {
    return config;
  }

  public EnvoyProfile profile() {
    return profile;
  }

  public Duration awaitTimeout() {
    return awaitTimeout;
  }

  Channel channel() {
    return channel;
  }

  ScheduledExecutorService timer() {
    return timer;
  }

  ExecutorService pool() {
    return pool;
  }

  int bufferLimitBytes() {
    return bufferLimitBytes;
  }

  boolean stripContentLengthOnModeOverride() {
    return stripContentLengthOnModeOverride;
  }

  int statusOnError() {
    return statusOnError;
  }

  HeaderMutator mutator() {
    return mutator;
  }

  long messageTimeoutMillis() {
    return messageTimeoutMillis;
  }

  long maxMessageTimeoutMillis() {
    return maxMessageTimeoutMillis;
  }

  @Override
  public void close() {
    pool.shutdownNow();
    if (ownsTimer) {
      timer.shutdownNow();
    }
  }

  private static ThreadFactory daemon(String prefix) {
    AtomicInteger n = new AtomicInteger();
    return r -> {
      Thread t = new Thread(r, prefix + "-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
  }

  /** Builder for {@link FakeEnvoy}. */
  public static final class Builder {
    private final Channel channel;
    private ExternalProcessor config = ExternalProcessor.getDefaultInstance();
    private EnvoyProfile profile = EnvoyProfile.V1_37;
    private ScheduledExecutorService timer;
    private int bufferLimitBytes = DEFAULT_BUFFER_LIMIT;
    private boolean stripContentLengthOnModeOverride;
    private int statusOnError = 500;
    private Duration awaitTimeout = Duration.ofSeconds(10);

    private Builder(Channel channel) {
      this.channel = Objects.requireNonNull(channel);
    }

    /** The {@code envoy.filters.http.ext_proc} filter config (defaults to all-default proto). */
    public Builder config(ExternalProcessor config) {
      this.config = Objects.requireNonNull(config);
      return this;
    }

    public Builder profile(EnvoyProfile profile) {
      this.profile = Objects.requireNonNull(profile);
      return this;
    }

    /**
     * The clock for per-message timers (real time). When not given, the harness owns one and
     * shuts it down on {@link #close()}.
     */
    public Builder timer(ScheduledExecutorService timer) {
      this.timer = Objects.requireNonNull(timer);
      return this;
    }

    /** The decoder/encoder buffer limit (BUFFERED overflow → 413/500; BUFFERED_PARTIAL cut). */
    public Builder bufferLimitBytes(int bytes) {
      if (bytes <= 0) {
        throw new IllegalArgumentException("buffer limit must be positive");
      }
      this.bufferLimitBytes = bytes;
      return this;
    }

    /**
     * Whether a {@code mode_override} that turns on STREAMED/BUFFERED_PARTIAL in a headers reply
     * also strips {@code content-length} from the headers being answered. Default false: the
     * spec infers Envoy decides at header arrival only, so the server must remove it itself.
     */
    public Builder stripContentLengthOnModeOverride(boolean strip) {
      this.stripContentLengthOnModeOverride = strip;
      return this;
    }

    /** {@code status_on_error} (1.36+ field, 500 by default and in older versions). */
    public Builder statusOnError(int status) {
      this.statusOnError = status;
      return this;
    }

    /** Upper bound for the blocking await methods of {@link ExchangeHandle}. */
    public Builder awaitTimeout(Duration timeout) {
      this.awaitTimeout = Objects.requireNonNull(timeout);
      return this;
    }

    public FakeEnvoy build() {
      return new FakeEnvoy(this);
    }
  }
}
